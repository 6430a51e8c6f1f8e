//go:build amd64 && !purego

#include "textflag.h"

// The kernels walk their slices in blocks of 16 floats (two 8-lane
// registers) while 16 remain, then one block of 8, then one float at a time.
// AX is the index; R8..R11 point at x0..x3 (at x alone in dot1).

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
	MOVQ x0_base+24(FP), R8
	MOVQ x1_base+48(FP), R9
	MOVQ x2_base+72(FP), R10
	MOVQ x3_base+96(FP), R11
	VBROADCASTSS a0+120(FP), Y0
	VBROADCASTSS a1+124(FP), Y1
	VBROADCASTSS a2+128(FP), Y2
	VBROADCASTSS a3+132(FP), Y3
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-16, DX

axpy16:
	CMPQ AX, DX
	JGE  axpy8
	VMOVUPS (DI)(AX*4), Y4
	VMOVUPS 32(DI)(AX*4), Y5
	AXPY16(R8, Y0)
	AXPY16(R9, Y1)
	AXPY16(R10, Y2)
	AXPY16(R11, Y3)
	VMOVUPS Y4, (DI)(AX*4)
	VMOVUPS Y5, 32(DI)(AX*4)
	ADDQ $16, AX
	JMP  axpy16

axpy8:
	MOVQ CX, DX
	ANDQ $-8, DX
	CMPQ AX, DX
	JGE  axpy1
	VMOVUPS (DI)(AX*4), Y4
	AXPY4(VFMADD231PS, Y4, Y0, Y1, Y2, Y3)
	VMOVUPS Y4, (DI)(AX*4)
	ADDQ $8, AX

axpy1:
	CMPQ AX, CX
	JGE  axpydone
	VMOVSS (DI)(AX*4), X4
	AXPY4(VFMADD231SS, X4, X0, X1, X2, X3)
	VMOVSS X4, (DI)(AX*4)
	INCQ AX
	JMP  axpy1

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

// DOT16(X, S, T): S += Y8 * X and T += Y9 * X's next 8 floats from AX on
// (Y8:Y9 holding w's 16 floats there).
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
	MOVQ x0_base+24(FP), R8
	MOVQ x1_base+48(FP), R9
	MOVQ x2_base+72(FP), R10
	MOVQ x3_base+96(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-16, DX

dot4x16:
	CMPQ AX, DX
	JGE  dot4x8
	VMOVUPS (SI)(AX*4), Y8
	VMOVUPS 32(SI)(AX*4), Y9
	DOT16(R8, Y0, Y4)
	DOT16(R9, Y1, Y5)
	DOT16(R10, Y2, Y6)
	DOT16(R11, Y3, Y7)
	ADDQ $16, AX
	JMP  dot4x16

dot4x8:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	MOVQ CX, DX
	ANDQ $-8, DX
	CMPQ AX, DX
	JGE  dot4h
	VMOVUPS (SI)(AX*4), Y8
	DOT4(VFMADD231PS, Y8, Y0, Y1, Y2, Y3)
	ADDQ $8, AX

dot4h:
	HSUM(Y0, X0, X8)
	HSUM(Y1, X1, X8)
	HSUM(Y2, X2, X8)
	HSUM(Y3, X3, X8)

dot4x1:
	CMPQ AX, CX
	JGE  dot4done
	VMOVSS (SI)(AX*4), X8
	DOT4(VFMADD231SS, X8, X0, X1, X2, X3)
	INCQ AX
	JMP  dot4x1

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
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-16, DX

dot1x16:
	CMPQ AX, DX
	JGE  dot1x8
	VMOVUPS (SI)(AX*4), Y8
	VMOVUPS 32(SI)(AX*4), Y9
	DOT16(R8, Y0, Y4)
	ADDQ $16, AX
	JMP  dot1x16

dot1x8:
	VADDPS Y4, Y0, Y0
	MOVQ CX, DX
	ANDQ $-8, DX
	CMPQ AX, DX
	JGE  dot1h
	VMOVUPS (SI)(AX*4), Y8
	VFMADD231PS (R8)(AX*4), Y8, Y0
	ADDQ $8, AX

dot1h:
	HSUM(Y0, X0, X8)

dot1x1:
	CMPQ AX, CX
	JGE  dot1done
	VMOVSS (SI)(AX*4), X8
	VFMADD231SS (R8)(AX*4), X8, X0
	INCQ AX
	JMP  dot1x1

dot1done:
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET
