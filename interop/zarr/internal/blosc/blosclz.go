package blosc

import "fmt"

// BloscLZ is FastLZ's level-2 format. A stream is a sequence of
// instructions, each starting with a control byte; the first instruction
// is always a literal run (the top three bits of the first byte carry a
// format marker and are ignored):
//
//   - ctrl < 32: a literal run of ctrl+1 bytes follows.
//   - otherwise a match: length code ctrl>>5 (7 means more length bytes
//     follow, each added, until one is not 255), then one distance byte;
//     the distance is ((ctrl&31)<<8 | byte) + 1, or, when the distance byte
//     is 255 and ctrl&31 is 31, 8192 plus a big-endian 16-bit value that
//     follows. The match copies length+2 bytes from that far back, byte by
//     byte (it may overlap its own output).
//
// A match must be followed by another instruction: c-blosc stops, without
// copying it, at a match that ends the stream, so such a stream never
// fills its block.
const blosclzMaxDistance = 8191

// blosclz decodes a BloscLZ stream that must fill out exactly.
func blosclz(out, in []byte) error {
	if len(in) == 0 {
		return fmt.Errorf("%w: blosclz: empty stream", ErrCorrupt)
	}
	ip, op := 1, 0
	ctrl := int(in[0] & 31)
	for {
		if ctrl >= 32 {
			length := ctrl>>5 - 1
			far := ctrl & 31 << 8
			if length == 6 {
				for {
					if ip+1 >= len(in) {
						return fmt.Errorf("%w: blosclz: match length runs past the stream", ErrCorrupt)
					}
					code := int(in[ip])
					ip++
					length += code
					if length > len(out) { // also keeps length from overflowing
						return fmt.Errorf("%w: blosclz: match of %d bytes overruns the %d-byte block", ErrCorrupt, length, len(out))
					}
					if code != 255 {
						break
					}
				}
			} else if ip+1 >= len(in) {
				return fmt.Errorf("%w: blosclz: match distance runs past the stream", ErrCorrupt)
			}
			code := int(in[ip])
			ip++
			length += 3
			dist := far + code + 1
			if code == 255 && far == 31<<8 {
				if ip+1 >= len(in) {
					return fmt.Errorf("%w: blosclz: far distance runs past the stream", ErrCorrupt)
				}
				dist = int(in[ip])<<8 | int(in[ip+1]) + blosclzMaxDistance + 1
				ip += 2
			}
			if length > len(out)-op {
				return fmt.Errorf("%w: blosclz: match of %d bytes at %d overruns the %d-byte block", ErrCorrupt, length, op, len(out))
			}
			if dist > op {
				return fmt.Errorf("%w: blosclz: match distance %d before the start of the block (at %d)", ErrCorrupt, dist, op)
			}
			if ip >= len(in) {
				break
			}
			ctrl = int(in[ip])
			ip++
			matchCopy(out[op-dist:op+length], dist)
			op += length
		} else {
			n := ctrl + 1
			if n > len(out)-op {
				return fmt.Errorf("%w: blosclz: %d literals at %d overrun the %d-byte block", ErrCorrupt, n, op, len(out))
			}
			if n > len(in)-ip {
				return fmt.Errorf("%w: blosclz: %d literals run past the stream", ErrCorrupt, n)
			}
			copy(out[op:], in[ip:ip+n])
			op += n
			ip += n
			if ip >= len(in) {
				break
			}
			ctrl = int(in[ip])
			ip++
		}
	}
	if op != len(out) {
		return fmt.Errorf("%w: blosclz: stream decodes to %d bytes, block holds %d", ErrCorrupt, op, len(out))
	}
	return nil
}

// matchCopy fills w[dist:] from w[:len(w)-dist] as a forward byte-by-byte
// copy would, so that a match overlapping its own output repeats the
// dist-byte pattern before it.
func matchCopy(w []byte, dist int) {
	if dist == 1 {
		b := w[0]
		for i := 1; i < len(w); i++ {
			w[i] = b
		}
		return
	}
	// w[:done] repeats the pattern, so it can be copied whole: each copy
	// doubles what is done and never reads a byte it writes.
	for done := dist; done < len(w); {
		done += copy(w[done:], w[:done])
	}
}
