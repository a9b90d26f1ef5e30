package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runWords runs the binary's dispatcher on words and returns its exit
// status, stdout and stderr.
func runWords(words ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(words, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestEveryCommandAnswersHelp asks every command in the table for its
// usage in each of the three ways; each prints that command's usage, once,
// on stdout, and exits 0.
func TestEveryCommandAnswersHelp(t *testing.T) {
	require.NotEmpty(t, commands)
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			name := strings.Fields(cmd.name)
			asks := map[string][]string{
				"--help":       append(append([]string{}, name...), "--help"),
				"-h":           append(append([]string{}, name...), "-h"),
				"help COMMAND": append([]string{"help"}, name...),
			}
			for how, words := range asks {
				code, stdout, stderr := runWords(words...)
				assert.Equal(t, exitOK, code, "%s: exit status", how)
				assert.Empty(t, stderr, "%s: stderr", how)
				assert.True(t, strings.HasPrefix(stdout, "usage: open-conduit "+cmd.name), "%s: stdout starts with the usage:\n%s", how, stdout)
				assert.Equal(t, 1, strings.Count(stdout, "usage:"), "%s: one usage:\n%s", how, stdout)
			}
		})
	}
}

// TestCommandList checks that the list printed for help names every
// command of the table with its summary, and that the names are unique.
func TestCommandList(t *testing.T) {
	for _, words := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, stdout, stderr := runWords(words...)
		require.Equal(t, exitOK, code, words)
		assert.Empty(t, stderr, words)
		for _, cmd := range commands {
			assert.Contains(t, stdout, synopsis(cmd)+" ", words)
			assert.Contains(t, stdout, cmd.summary, words)
		}
	}
	seen := map[string]bool{}
	for _, cmd := range commands {
		assert.False(t, seen[cmd.name], "command %q listed twice", cmd.name)
		seen[cmd.name] = true
		assert.NotEmpty(t, cmd.summary, cmd.name)
		assert.NotNil(t, cmd.run, cmd.name)
	}

	// Without a command, the same list is a usage error on stderr.
	code, stdout, stderr := runWords()
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "usage: open-conduit COMMAND")
}

// TestUnknownCommand checks every way of naming a command that does not
// exist: exit status 2 and "unknown command X" on stderr, nothing run.
func TestUnknownCommand(t *testing.T) {
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"bogus", "--help"}, `unknown command "bogus"`},
		{[]string{"extension", "bogus"}, `unknown command "extension bogus"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"help", "extension", "bogus"}, `unknown command "extension bogus"`},
		{[]string{"help", "version", "extra"}, `unknown command "version extra"`},
		{[]string{"extension"}, `open-conduit extension: missing subcommand`},
	}
	for _, c := range cases {
		code, stdout, stderr := runWords(c.words...)
		assert.Equal(t, exitUsage, code, c.words)
		assert.Empty(t, stdout, c.words)
		assert.Contains(t, stderr, c.want, c.words)
	}
}

// TestHelpAfterDoubleDash checks that a -h after "--" is an argument of the
// command, not a request for help.
func TestHelpAfterDoubleDash(t *testing.T) {
	assert.True(t, helpRequested([]string{"x", "--help"}))
	assert.False(t, helpRequested([]string{"--", "--help"}))
	assert.False(t, helpRequested([]string{"x"}))
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runWords("version")
	assert.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(stdout, "open-conduit protocol "), stdout)

	code, _, stderr := runWords("version", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "usage: open-conduit version")
}
