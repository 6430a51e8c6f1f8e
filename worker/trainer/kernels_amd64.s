//go:build amd64 && !purego

#include "textflag.h"

// The kernels walk their slices in blocks of 16 floats (two 8-lane
// registers) while 16 remain, then one block of 8, then one float at a time.
// AX is the index; R8..R11 point at x0..x3 (at x alone in dot1).

// X0X3 points R8..R11 at x0..x3.
#define X0X3 \
	MOVQ x0_base+24(FP), R8; \
	MOVQ x1_base+48(FP), R9; \
	MOVQ x2_base+72(FP), R10; \
	MOVQ x3_base+96(FP), R11

// START: AX = 0 and DX = the length, CX, rounded down to 16.
#define START \
	XORQ AX, AX; \
	MOVQ CX, DX; \
	ANDQ $-16, DX

// WHILE16(loop, next) ... AGAIN16(loop): the loop over blocks of 16 from
// AX, on to next when fewer remain.
#define WHILE16(loop, next) \
loop: \
	CMPQ AX, DX; \
	JGE  next

#define AGAIN16(loop) \
	ADDQ $16, AX; \
	JMP  loop

// IF8(next): DX = CX rounded down to 8; to next unless a block of 8
// remains from AX (the block then ends with ADDQ $8, AX).
#define IF8(next) \
	MOVQ CX, DX; \
	ANDQ $-8, DX; \
	CMPQ AX, DX; \
	JGE  next

// WHILE1(loop, done) ... AGAIN1(loop): the loop over the floats left, one
// at a time, on to done at the end.
#define WHILE1(loop, done) \
loop: \
	CMPQ AX, CX; \
	JGE  done

#define AGAIN1(loop) \
	INCQ AX; \
	JMP  loop

// FMA4(OP, M0, D0, ..., M3, D3): Dk += Mk * xk from AX on, k = 0..3 in that
// order; OP picks the width: VFMADD231PS 8 floats, VFMADD231SS one.
#define FMA4(OP, M0, D0, M1, D1, M2, D2, M3, D3) \
	OP (R8)(AX*4), M0, D0; \
	OP (R9)(AX*4), M1, D1; \
	OP (R10)(AX*4), M2, D2; \
	OP (R11)(AX*4), M3, D3

// AXPY4(OP, Y, A0, A1, A2, A3): Y += Ak * xk, k = 0..3 in that order.
#define AXPY4(OP, Y, A0, A1, A2, A3) FMA4(OP, A0, Y, A1, Y, A2, Y, A3, Y)

// AXPY16(X, A): Y4:Y5 += A * the 16 floats of X from AX on.
#define AXPY16(X, A) \
	VFMADD231PS (X)(AX*4), A, Y4; \
	VFMADD231PS 32(X)(AX*4), A, Y5

// func axpy4AVX2(y, x0, x1, x2, x3 []float32, a0, a1, a2, a3 float32)
// y[j] = fma(a3, x3[j], fma(a2, x2[j], fma(a1, x1[j], fma(a0, x0[j], y[j]))))
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-136
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	X0X3
	VBROADCASTSS a0+120(FP), Y0
	VBROADCASTSS a1+124(FP), Y1
	VBROADCASTSS a2+128(FP), Y2
	VBROADCASTSS a3+132(FP), Y3
	START

	WHILE16(axpy16, axpy8)
	VMOVUPS (DI)(AX*4), Y4
	VMOVUPS 32(DI)(AX*4), Y5
	AXPY16(R8, Y0)
	AXPY16(R9, Y1)
	AXPY16(R10, Y2)
	AXPY16(R11, Y3)
	VMOVUPS Y4, (DI)(AX*4)
	VMOVUPS Y5, 32(DI)(AX*4)
	AGAIN16(axpy16)

axpy8:
	IF8(axpy1)
	VMOVUPS (DI)(AX*4), Y4
	AXPY4(VFMADD231PS, Y4, Y0, Y1, Y2, Y3)
	VMOVUPS Y4, (DI)(AX*4)
	ADDQ $8, AX

	WHILE1(axpy1, axpydone)
	VMOVSS (DI)(AX*4), X4
	AXPY4(VFMADD231SS, X4, X0, X1, X2, X3)
	VMOVSS X4, (DI)(AX*4)
	AGAIN1(axpy1)

axpydone:
	VZEROUPPER
	RET

// hsum leaves the sum of the eight lanes of Y in the low lane of X, in a
// fixed order: (lo+hi) pairwise.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VHADDPS X, X, X; \
	VHADDPS X, X, X

// DOT4(OP, W, S0, S1, S2, S3): Sk += W * xk, k = 0..3 in that order.
#define DOT4(OP, W, S0, S1, S2, S3) FMA4(OP, W, S0, W, S1, W, S2, W, S3)

// W16: Y8:Y9 = w's 16 floats from AX on.
#define W16 \
	VMOVUPS (SI)(AX*4), Y8; \
	VMOVUPS 32(SI)(AX*4), Y9

// DOT16(X, S, T): S += Y8 * X and T += Y9 * X's next 8 floats from AX on
// (Y8:Y9 holding w's 16 floats there: W16).
#define DOT16(X, S, T) \
	VFMADD231PS (X)(AX*4), Y8, S; \
	VFMADD231PS 32(X)(AX*4), Y9, T

// func dot4AVX2(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32)
// Each sum: two 8-lane accumulators over blocks of 16, the second folded
// into the first, an 8-block into the first, the lanes summed, then the
// tail added one by one. dot1AVX2 follows the same order, so a product does
// not depend on which of the two computed it.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-136
	MOVQ w_base+0(FP), SI
	MOVQ w_len+8(FP), CX
	X0X3
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	START

	WHILE16(dot4x16, dot4x8)
	W16
	DOT16(R8, Y0, Y4)
	DOT16(R9, Y1, Y5)
	DOT16(R10, Y2, Y6)
	DOT16(R11, Y3, Y7)
	AGAIN16(dot4x16)

dot4x8:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	IF8(dot4h)
	VMOVUPS (SI)(AX*4), Y8
	DOT4(VFMADD231PS, Y8, Y0, Y1, Y2, Y3)
	ADDQ $8, AX

dot4h:
	HSUM(Y0, X0, X8)
	HSUM(Y1, X1, X8)
	HSUM(Y2, X2, X8)
	HSUM(Y3, X3, X8)

	WHILE1(dot4x1, dot4done)
	VMOVSS (SI)(AX*4), X8
	DOT4(VFMADD231SS, X8, X0, X1, X2, X3)
	AGAIN1(dot4x1)

dot4done:
	VMOVSS X0, s0+120(FP)
	VMOVSS X1, s1+124(FP)
	VMOVSS X2, s2+128(FP)
	VMOVSS X3, s3+132(FP)
	VZEROUPPER
	RET

// func dot1AVX2(w, x []float32) float32
TEXT ·dot1AVX2(SB), NOSPLIT, $0-52
	MOVQ w_base+0(FP), SI
	MOVQ w_len+8(FP), CX
	MOVQ x_base+24(FP), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y4, Y4, Y4
	START

	WHILE16(dot1x16, dot1x8)
	W16
	DOT16(R8, Y0, Y4)
	AGAIN16(dot1x16)

dot1x8:
	VADDPS Y4, Y0, Y0
	IF8(dot1h)
	VMOVUPS (SI)(AX*4), Y8
	VFMADD231PS (R8)(AX*4), Y8, Y0
	ADDQ $8, AX

dot1h:
	HSUM(Y0, X0, X8)

	WHILE1(dot1x1, dot1done)
	VMOVSS (SI)(AX*4), X8
	VFMADD231SS (R8)(AX*4), X8, X0
	AGAIN1(dot1x1)

dot1done:
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET
