package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// docMarkers returns the lines that open and close suite's generated
// section of a Markdown document. suite may carry flags ("queue
// --non-durable"): a section of its own, with the command that makes it.
func docMarkers(suite string) (begin, end string) {
	return "<!-- BEGIN GENERATED: " + suite + " (cd bench && go run . " + suite + " --doc FILE); do not edit -->",
		"<!-- END GENERATED: " + suite + " -->"
}

// writeDocSection replaces suite's generated section of the Markdown file
// at path with content, keeping everything around it; a file without the
// section gets it appended (a missing file is created).
func writeDocSection(path, suite, content string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := replaceSection(string(old), suite, content)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// replaceSection returns doc with suite's generated section holding
// content.
func replaceSection(doc, suite, content string) (string, error) {
	begin, end := docMarkers(suite)
	section := begin + "\n\n" + strings.TrimRight(content, "\n") + "\n\n" + end
	i := strings.Index(doc, begin)
	if i < 0 {
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if doc != "" {
			doc += "\n"
		}
		return doc + section + "\n", nil
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return "", fmt.Errorf("the %s section has no end marker %q", suite, end)
	}
	return doc[:i] + section + doc[i+j+len(end):], nil
}
