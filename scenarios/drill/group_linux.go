//go:build linux

package drill

import (
	"os"
	"strconv"
	"strings"
)

// groupMembers lists the processes of group pgid, zombies included, from
// /proc; the leader always, so a wait on the list follows the group.
func groupMembers(pgid int) []int {
	members := []int{pgid}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return members
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: the
		// fields after it are the state, the parent, then the group.
		s := string(data)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 2 && f[2] == strconv.Itoa(pgid) {
				members = append(members, pid)
			}
		}
	}
	return members
}
