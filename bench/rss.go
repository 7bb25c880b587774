package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// childRSS runs a command and returns its peak resident memory in KB.
// It runs it from a fresh process of this program (-rss-of): Linux
// counts, in the peak of a process the Go runtime starts, the memory of
// the process that started it (they share it until exec), and this one
// holds the goals' rows.
func childRSS(args ...string) float64 {
	self, err := os.Executable()
	check(err)
	spec, err := json.Marshal(args)
	check(err)
	out, err := exec.Command(self, "-rss-of", string(spec)).Output()
	if err != nil {
		log.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	kb, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	check(err)
	return kb
}

// printRSS runs the command spec names and prints its peak resident
// memory in KB.
func printRSS(spec string) {
	var args []string
	check(json.Unmarshal([]byte(spec), &args))
	cmd := exec.Command(args[0], args[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	fmt.Println(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
}
