package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Docs and comments name files that exist: a path in backticks in a doc
// (`proxy/admit.go`), or a repository path in a Go comment, must be there.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := "../.."
	docPath := regexp.MustCompile("`((?:[a-z0-9_-]+/)+[a-zA-Z0-9_.-]+\\.(?:go|lua|md|yaml|sh|conf|json))`")
	// A bare file name in a comment names a file of the comment's package.
	bareName := regexp.MustCompile(`//.*?[\s(]([a-z0-9_]+\.(?:go|lua))\b`)
	commentPath := regexp.MustCompile(`//.*?\b((?:allocator|api|calls|cmd|config|deploy|docs|forwarded|internal|plugins|poolmgr|providers|proxy|bench|test)/[a-zA-Z0-9_/.-]+\.(?:go|lua|md|yaml|sh))\b`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		var re *regexp.Regexp
		switch {
		case strings.HasSuffix(path, ".md"):
			re = docPath
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".pb.go"):
			re = commentPath
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			if strings.ContainsAny(name, "*{}<>") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s names %s, which does not exist", rel, name)
			}
		}
		if re == commentPath && !strings.HasSuffix(path, "_test.go") {
			for _, m := range bareName.FindAllStringSubmatch(string(b), -1) {
				dir := filepath.Dir(path)
				_, err := os.Stat(filepath.Join(dir, m[1]))
				if err != nil {
					_, err = os.Stat(filepath.Join(dir, "lua", m[1])) // embedded scripts
				}
				if err != nil {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s names %s, which is not in its package", rel, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
