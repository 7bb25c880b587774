package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runnableBlocks returns the shell blocks of a Markdown file marked
// runnable (```sh runnable), each its commands, a line continued with
// a trailing backslash joined to the next.
func runnableBlocks(markdown string) [][]string {
	var blocks [][]string
	var cur []string
	in, pending := false, ""
	for line := range strings.Lines(markdown) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && strings.TrimSpace(line) == "```sh runnable":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			if l, ok := strings.CutSuffix(line, `\`); ok {
				pending += l
				continue
			}
			if cmd := strings.TrimSpace(pending + line); cmd != "" {
				cur = append(cur, cmd)
			}
			pending = ""
		}
	}
	return blocks
}

// Every command a guide (or the README) marks runnable runs, as shown,
// with drainpipe the binary under test, in a folder of its own a guide:
// the docs cannot rot.
func TestGuidesRun(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "drainpipe")); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, file := range append(files, "../../README.md") {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := runnableBlocks(string(data))
		if len(blocks) == 0 {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			dir := t.TempDir()
			for _, block := range blocks {
				for _, cmd := range block {
					c := exec.Command("bash", "-euo", "pipefail", "-c", cmd)
					c.Dir = dir
					c.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
					var out bytes.Buffer
					c.Stdout, c.Stderr = &out, &out
					if err := c.Run(); err != nil {
						t.Fatalf("%s: %v\n%s", cmd, err, out.String())
					}
					ran++
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("no guide marks a command runnable")
	}
}

func TestRunnableBlocks(t *testing.T) {
	md := "text\n```sh runnable\na \\\n  b\n\nc\n```\n```sh\nnot this\n```\n"
	got := runnableBlocks(md)
	if len(got) != 1 || strings.Join(got[0], "|") != "a   b|c" {
		t.Errorf("blocks %q", got)
	}
}
