package proc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// DefaultMaxLine caps one stdout line unless Spec.MaxLine says otherwise.
// The CLIs print a whole file they read on one line: tens of MB happen.
const DefaultMaxLine = 64 << 20

// readBuffer is the reader's buffer: lines up to this size are handed over
// without a copy.
const readBuffer = 64 << 10

// keepBuffer is the largest line buffer kept for the next line; a buffer
// grown by a bigger line is dropped so that one huge line does not pin its
// memory for the rest of the session.
const keepBuffer = 1 << 20

// readLines reads r as lines ending in '\n' and calls onLine with each one,
// without its '\n' (nor a '\r' before it). A line longer than limit bytes
// is cut to its first limit bytes and handed over with truncated set; the rest
// of it is read and dropped. A last line without '\n' is handed over too.
// The slice is valid only during the call. It returns how many lines were
// handed over and how many of them were cut, at io.EOF or the first read
// error.
func readLines(r io.Reader, limit int, onLine func(line []byte, truncated bool)) (lines, cut int, err error) {
	br := bufio.NewReaderSize(r, readBuffer)
	var buf []byte // the line so far, when it spans several reads
	over := false  // the line so far went past limit
	emit := func(line []byte) {
		line = bytes.TrimSuffix(line, []byte{'\r'})
		lines++
		if over {
			cut++
		}
		onLine(line, over)
		over = false
		if cap(buf) > keepBuffer {
			buf = nil
		} else {
			buf = buf[:0]
		}
	}
	for {
		chunk, rerr := br.ReadSlice('\n')
		complete := rerr == nil
		if complete {
			chunk = chunk[:len(chunk)-1]
		}
		if complete && len(buf) == 0 && !over && len(chunk) <= limit {
			emit(chunk) // the common case: no copy
			continue
		}
		if room := limit - len(buf); room < len(chunk) {
			over = true
			chunk = chunk[:max(room, 0)]
		}
		buf = append(buf, chunk...)
		switch {
		case complete:
			emit(buf)
		case errors.Is(rerr, bufio.ErrBufferFull):
		case errors.Is(rerr, io.EOF):
			if len(buf) > 0 || over {
				emit(buf)
			}
			return lines, cut, nil
		default:
			if len(buf) > 0 || over {
				emit(buf)
			}
			return lines, cut, rerr
		}
	}
}
