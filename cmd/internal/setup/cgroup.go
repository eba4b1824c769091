package setup

import (
	"bytes"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
)

// cgroupLimit returns the memory limit of the control group the process
// is in, the smallest on the way from its group up to the root, and
// whether there is one: what a container may use, where /proc/meminfo
// shows the host's. cgroupFile is /proc/self/cgroup's text; root is where
// the cgroup file systems are mounted (/sys/fs/cgroup): version 2's
// memory.max there, or version 1's memory/memory.limit_in_bytes. A file
// that cannot be read or does not parse is no limit.
func cgroupLimit(root string, cgroupFile []byte) (int64, bool) {
	limit, found := int64(math.MaxInt64), false
	see := func(file string) {
		if n, ok := readLimit(file); ok && n < limit {
			limit, found = n, true
		}
	}
	for line := range bytes.Lines(cgroupFile) {
		// hierarchy-ID:controllers:path
		f := bytes.SplitN(bytes.TrimRight(line, "\n"), []byte(":"), 3)
		if len(f) != 3 || len(f[2]) == 0 || f[2][0] != '/' {
			continue
		}
		var dir, name string
		switch {
		case string(f[0]) == "0" && len(f[1]) == 0: // version 2
			dir, name = root, "memory.max"
		case hasController(f[1], "memory"): // version 1
			dir, name = filepath.Join(root, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		// In a container's own cgroup namespace the path is "/" and its
		// group is the mount's root; outside one, the group and each of
		// its ancestors may set a limit.
		for p := path.Clean(string(f[2])); ; p = path.Dir(p) {
			see(filepath.Join(dir, filepath.FromSlash(p), name))
			if p == "/" {
				break
			}
		}
	}
	return limit, found
}

func hasController(list []byte, name string) bool {
	for c := range bytes.SplitSeq(list, []byte(",")) {
		if string(c) == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup memory limit in bytes: "max" (version 2) and
// version 1's "no limit", a page-rounded 2^63-1, are none.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false
	}
	return n, true
}
