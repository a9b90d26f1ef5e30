// Command ext-raw is the floor: it answers length-prefixed frames on its
// stdio with no JSON, an echo frame with itself and a chunk with a short
// acknowledgement.
package main

import (
	"bufio"
	"os"

	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

func main() {
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	var in, out []byte
	ack := []byte{'A'}
	var err error
	for {
		if in, err = workload.ReadFrame(r, in); err != nil {
			return
		}
		answer := ack
		if len(in) > 0 && in[0] == 'E' {
			answer = in
		}
		if out, err = workload.WriteFrame(os.Stdout, out, answer); err != nil {
			return
		}
	}
}
