package shell_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/extensions/shell"
)

// writeInput writes a line to a job's input pipe directly, as nothing but
// the job itself holds it while no executor runs.
func writeInput(rec shell.Recovery, line string) error {
	f, err := os.OpenFile(filepath.Join(rec.Dir, shell.InputFile), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n")
	return err
}

func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// waitGone waits for a process that is not the test's child to exit. No
// event reports that here (the job's parent was the executor, now gone), so
// it checks at an interval, bounded by ctx.
func waitGone(ctx context.Context, pid int) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for alive(pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
