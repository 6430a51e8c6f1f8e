#include "textflag.h"

// The loops below take dst in DI, src in SI and n in CX (ARGS), and count
// CX down over the blocks of n (BLOCKS).
#define ARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX

// BLOCKS(shift, done): CX = n >> shift, the number of blocks; to done when
// there are none.
#define BLOCKS(shift, done) \
	SHRQ $shift, CX; \
	JZ   done

// NEXT(loop): to loop again while blocks remain.
#define NEXT(loop) \
	DECQ CX; \
	JNZ  loop

// EACH(loop, done, LOAD, STORE): LOAD then STORE on each block, then
// VZEROUPPER and return.
#define EACH(loop, done, LOAD, STORE) \
loop: \
	LOAD; \
	STORE; \
	NEXT(loop); \
done: \
	VZEROUPPER; \
	RET

// SUM32: Y0..Y3 = the 32 floats at DI plus the 32 at SI.
#define SUM32 \
	VMOVUPS 0(DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	VMOVUPS 64(DI), Y2; \
	VMOVUPS 96(DI), Y3; \
	VADDPS  0(SI), Y0, Y0; \
	VADDPS  32(SI), Y1, Y1; \
	VADDPS  64(SI), Y2, Y2; \
	VADDPS  96(SI), Y3, Y3

// PUT32 stores Y0..Y3 at DI and moves DI and SI on by 32 floats.
#define PUT32 \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	ADDQ    $128, DI; \
	ADDQ    $128, SI

// HALF16: Y0:Y1 = the 16 halves at SI, as floats.
#define HALF16 \
	VCVTPH2PS 0(SI), Y0; \
	VCVTPH2PS 16(SI), Y1

// PUT16 stores Y0:Y1 at DI and moves SI on by 16 halves, DI by 16 floats.
#define PUT16 \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	ADDQ    $32, SI; \
	ADDQ    $64, DI

// ADDHALF16: Y0:Y1 = the 16 floats at DI plus the 16 halves at SI.
#define ADDHALF16 \
	HALF16; \
	VADDPS 0(DI), Y0, Y0; \
	VADDPS 32(DI), Y1, Y1

// FLOAT16: Y0:Y1 = the 16 floats at SI.
#define FLOAT16 \
	VMOVUPS 0(SI), Y0; \
	VMOVUPS 32(SI), Y1

// PUTHALF16 stores Y0:Y1 at DI as halves, to nearest even, and moves SI
// on by 16 floats, DI by 16 halves.
#define PUTHALF16 \
	VCVTPS2PH $0, Y0, 0(DI); \
	VCVTPS2PH $0, Y1, 16(DI); \
	ADDQ      $64, SI; \
	ADDQ      $32, DI

// SCALEDSUM32: Y0..Y3 = (the 32 floats at DI plus the 32 at SI) * k,
// broadcast in Y4.
#define SCALEDSUM32 \
	SUM32; \
	VMULPS Y4, Y0, Y0; \
	VMULPS Y4, Y1, Y1; \
	VMULPS Y4, Y2, Y2; \
	VMULPS Y4, Y3, Y3

// func addAVX2(dst, src *float32, n int)
// dst[i] += src[i] for i < n; n is a multiple of 32.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	ARGS
	BLOCKS(5, addDone)
	EACH(addLoop, addDone, SUM32, PUT32)

// func addScaledAVX2(dst, src *float32, n int, k float32)
// dst[i] = (dst[i] + src[i]) * k for i < n; n is a multiple of 32.
TEXT ·addScaledAVX2(SB), NOSPLIT, $0-28
	ARGS
	VBROADCASTSS k+24(FP), Y4
	BLOCKS(5, scaledDone)
	EACH(scaledLoop, scaledDone, SCALEDSUM32, PUT32)

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (a, d uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL   $0, CX
	XGETBV
	MOVL   AX, a+0(FP)
	MOVL   DX, d+4(FP)
	RET

// func encodeHalfF16C(dst *uint16, src *float32, n int)
// dst[i] = half(src[i]), to nearest even; n is a multiple of 16.
TEXT ·encodeHalfF16C(SB), NOSPLIT, $0-24
	ARGS
	BLOCKS(4, encDone)
	EACH(encLoop, encDone, FLOAT16, PUTHALF16)

// func addHalfF16C(dst *float32, src *uint16, n int, k float32)
// dst[i] = (dst[i] + float(src[i])) * k, or without the multiply when k is
// 0; n is a multiple of 16.
TEXT ·addHalfF16C(SB), NOSPLIT, $0-28
	ARGS
	VBROADCASTSS k+24(FP), Y4
	BLOCKS(4, ahDone)
	VXORPS       Y5, Y5, Y5
	VUCOMISS     X5, X4
	JEQ          ahPlain

ahScaled:
	ADDHALF16
	VMULPS Y4, Y0, Y0
	VMULPS Y4, Y1, Y1
	PUT16
	NEXT(ahScaled)
	JMP    ahDone

	EACH(ahPlain, ahDone, ADDHALF16, PUT16)

// func decodeHalfF16C(dst *float32, src *uint16, n int)
// n is a multiple of 16.
TEXT ·decodeHalfF16C(SB), NOSPLIT, $0-24
	ARGS
	BLOCKS(4, decDone)
	EACH(decLoop, decDone, HALF16, PUT16)
