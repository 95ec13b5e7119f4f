#include "textflag.h"

// func streamAligned(dst, src unsafe.Pointer, n int)
TEXT ·streamAligned(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $64
	JB   tail32
loop64:
	VMOVDQU  0(SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	ADDQ     $64, SI
	ADDQ     $64, DI
	SUBQ     $64, CX
	CMPQ     CX, $64
	JAE      loop64
tail32:
	TESTQ    CX, CX
	JZ       done
	VMOVDQU  0(SI), Y0
	VMOVNTDQ Y0, 0(DI)
done:
	VZEROUPPER
	RET

// func fence()
TEXT ·fence(SB), NOSPLIT, $0-0
	SFENCE
	RET
