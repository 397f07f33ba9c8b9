package main

import (
	"os"
	"strconv"
	"strings"
)

// cpuTicks sums utime+stime (clock ticks) of the pids, threads included.
func cpuTicks(pids string) int64 {
	var total int64
	for _, pid := range splitPids(pids) {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += ut + st
	}
	return total
}

// rssKiB sums VmRSS of the pids.
func rssKiB(pids string) int64 {
	var total int64
	for _, pid := range splitPids(pids) {
		b, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				total += n
			}
		}
	}
	return total
}

func splitPids(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
