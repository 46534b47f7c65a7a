// Package buildinfo says which duilie a binary is: the module version and the commit it was
// built from, for duilie --version and the dashboard's duilie_build_info metric.
//
// Go records both when it builds from a git checkout. Where it records neither (-buildvcs=false,
// common in CI images; a git worktree, whose .git is a file Go does not follow; a copy of the
// tree without .git), the project's build script, .ci/build, stamps them:
//
//	go build -ldflags "-X github.com/duilie/duilie/internal/buildinfo.version=v0.0.0-20260102150405-0123456789ab
//	  -X github.com/duilie/duilie/internal/buildinfo.commit=0123456789abcdef… -X github.com/duilie/duilie/internal/buildinfo.modified=true"
//
// Go's own record comes first; the stamps fill in what it lacks.
package buildinfo

import "runtime/debug"

// Set by -ldflags -X (.ci/build); "" when the build did not.
var (
	version  string // the module version, as Go would write it
	commit   string // the full commit hash
	modified string // "true" when the tree had changes not committed
)

// Info is what a binary knows of its build.
type Info struct {
	Version  string // the main module's version; "(devel)" when nothing says
	Commit   string // the commit, "" when nothing says
	Modified bool   // the tree had changes not committed
}

// Read returns this binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi, Info{Version: version, Commit: commit, Modified: modified == "true"})
}

// From is Read for the build information bi (nil: none) and the stamps: Go's record first,
// then the stamps, then "(devel)".
func From(bi *debug.BuildInfo, stamped Info) Info {
	var in Info
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = stamped.Version
	}
	if in.Commit == "" {
		in.Commit, in.Modified = stamped.Commit, stamped.Modified
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	return in
}

// String is what duilie --version prints after the name: "v0.1.0 (commit 0123456789ab)", with
// ", modified" after the commit for a tree that had changes, or the version alone when
// nothing says which commit (go install of a tagged version: the tag names it).
func (in Info) String() string {
	if in.Commit == "" {
		return in.Version
	}
	s := in.Version + " (commit " + in.Commit[:min(12, len(in.Commit))]
	if in.Modified {
		s += ", modified"
	}
	return s + ")"
}
