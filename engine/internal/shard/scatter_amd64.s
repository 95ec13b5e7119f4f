#include "textflag.h"

// func scatterRowsNT(dst, src unsafe.Pointer, off []int, rb int)
// One row at a time, 64 bytes per step: four unaligned loads, four
// non-temporal (MOVNTDQ) stores.
TEXT ·scatterRowsNT(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off_base+16(FP), R8
	MOVQ off_len+24(FP), R9
	MOVQ rb+40(FP), R10
rows:
	TESTQ R9, R9
	JZ done
	MOVQ (R8), AX
	LEAQ (DI)(AX*1), BX
	MOVQ R10, CX
row:
	MOVOU (SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, (BX)
	MOVNTO X1, 16(BX)
	MOVNTO X2, 32(BX)
	MOVNTO X3, 48(BX)
	ADDQ $64, SI
	ADDQ $64, BX
	SUBQ $64, CX
	JNZ row
	ADDQ $8, R8
	DECQ R9
	JMP rows
done:
	SFENCE
	RET

// func gatherRows(dst, src unsafe.Pointer, off []int, rb int)
// One row at a time, 64 bytes per step, ordinary loads and stores.
TEXT ·gatherRows(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off_base+16(FP), R8
	MOVQ off_len+24(FP), R9
	MOVQ rb+40(FP), R10
grows:
	TESTQ R9, R9
	JZ gdone
	MOVQ (R8), AX
	LEAQ (SI)(AX*1), BX
	MOVQ R10, CX
grow:
	MOVOU (BX), X0
	MOVOU 16(BX), X1
	MOVOU 32(BX), X2
	MOVOU 48(BX), X3
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	ADDQ $64, BX
	ADDQ $64, DI
	SUBQ $64, CX
	JNZ grow
	ADDQ $8, R8
	DECQ R9
	JMP grows
gdone:
	RET
