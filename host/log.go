package host

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// LogLimit caps an extension's log file; past it the log ends with
// LogTruncatedMarker and further output is dropped. A variable so tests
// can lower it.
var LogLimit int64 = 1 << 20

// LogTruncatedMarker ends a log that reached LogLimit.
const LogTruncatedMarker = "\n[open-conduit: log truncated at its size limit; further output dropped]\n"

// boundedLog is an extension's log: its stderr and the host's own lines
// about it. It never blocks the writer on the limit: output past the limit
// is counted and dropped.
type boundedLog struct {
	mu        sync.Mutex
	f         *os.File
	size      int64
	truncated bool
	dropped   int64
}

func openLog(path string) (*boundedLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &boundedLog{f: f}, nil
}

func (l *boundedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.truncated {
		l.dropped += int64(len(p))
		return len(p), nil
	}
	room := LogLimit - l.size
	if int64(len(p)) <= room {
		n, err := l.f.Write(p)
		l.size += int64(n)
		if err != nil {
			return len(p), nil // a full disk must not stall the extension
		}
		return len(p), nil
	}
	if room > 0 {
		n, _ := l.f.Write(p[:room])
		l.size += int64(n)
	}
	l.f.Write([]byte(LogTruncatedMarker))
	l.truncated = true
	l.dropped += int64(len(p)) - max(room, 0)
	return len(p), nil
}

// hostLine writes one line of the host's own about the extension.
func (l *boundedLog) hostLine(format string, args ...any) {
	line := fmt.Sprintf("%s open-conduit: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	l.Write([]byte(line))
}

func (l *boundedLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
