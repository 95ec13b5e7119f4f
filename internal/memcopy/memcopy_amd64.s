#include "textflag.h"

// func streamAligned(dst, src unsafe.Pointer, n int)
// 64 bytes a step (four unaligned loads, four MOVNTDQ), then 16.
TEXT ·streamAligned(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $64
	JB   tail16
loop64:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DI
	SUBQ   $64, CX
	CMPQ   CX, $64
	JAE    loop64
tail16:
	TESTQ  CX, CX
	JZ     done
	MOVOU  0(SI), X0
	MOVNTO X0, 0(DI)
	ADDQ   $16, SI
	ADDQ   $16, DI
	SUBQ   $16, CX
	JMP    tail16
done:
	RET

// func scatterRows(dst, src unsafe.Pointer, off []int, rb int)
TEXT ·scatterRows(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off_base+16(FP), R8
	MOVQ off_len+24(FP), R9
	MOVQ rb+40(FP), R10
rows:
	TESTQ R9, R9
	JZ    rowsdone
	MOVQ  (R8), AX
	LEAQ  (DI)(AX*1), BX
	MOVQ  R10, CX
row:
	MOVOU  (SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	MOVNTO X0, (BX)
	MOVNTO X1, 16(BX)
	MOVNTO X2, 32(BX)
	MOVNTO X3, 48(BX)
	ADDQ   $64, SI
	ADDQ   $64, BX
	SUBQ   $64, CX
	JNZ    row
	ADDQ   $8, R8
	DECQ   R9
	JMP    rows
rowsdone:
	SFENCE
	RET

// func gatherRows(dst, src unsafe.Pointer, off []int, rb int)
TEXT ·gatherRows(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off_base+16(FP), R8
	MOVQ off_len+24(FP), R9
	MOVQ rb+40(FP), R10
grows:
	TESTQ R9, R9
	JZ    gdone
	MOVQ  (R8), AX
	LEAQ  (SI)(AX*1), BX
	MOVQ  R10, CX
grow:
	MOVOU (BX), X0
	MOVOU 16(BX), X1
	MOVOU 32(BX), X2
	MOVOU 48(BX), X3
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	ADDQ  $64, BX
	ADDQ  $64, DI
	SUBQ  $64, CX
	JNZ   grow
	ADDQ  $8, R8
	DECQ  R9
	JMP   grows
gdone:
	RET

// func fence()
TEXT ·fence(SB), NOSPLIT, $0-0
	SFENCE
	RET
