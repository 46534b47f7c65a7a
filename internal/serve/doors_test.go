package serve_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/duilie/duilie"

// The surfaces reach the platform through one door, package server (and the interface, the
// root package, with its JSON normalizer): none imports the host, the platform contract or a
// driver, and neither does any package of this module that only they depend on.
func TestOneDoor(t *testing.T) {
	surfaces := []string{"internal/cli", "internal/dashboard", "internal/cfapi", "internal/bench", "internal/serve"}
	forbidden := func(p string) bool {
		p = strings.TrimPrefix(p, module+"/")
		return p == "internal/host" || p == "internal/event" || p == "internal/bridge" || p == "platform" || strings.HasPrefix(p, "platform/")
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Deps       []string
	}
	list := func(args ...string) []pkg {
		out, err := exec.Command("go", append([]string{"list", "-deps=false", "-json"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		var ps []pkg
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p pkg
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		return ps
	}
	server := list(module + "/server")[0]
	behindServer := map[string]bool{module + "/server": true}
	for _, d := range server.Deps {
		behindServer[d] = true
	}
	for _, s := range surfaces {
		surface := list(module + "/" + s)[0]
		// The surface itself, and every package of the module it depends on that is not the
		// server's own.
		check := []string{surface.ImportPath}
		for _, d := range surface.Deps {
			// The Workers adapter is a runtime of its own beside the server (duilie worker
			// build compiles it into a program), built on the host as the server is.
			if d == module+"/workers" {
				continue
			}
			if strings.HasPrefix(d, module+"/") && !behindServer[d] {
				check = append(check, d)
			}
		}
		for _, p := range list(check...) {
			for _, imp := range p.Imports {
				if forbidden(imp) {
					t.Errorf("%s imports %s: surfaces reach the platform through package server", p.ImportPath, imp)
				}
			}
		}
		if !slices.Contains(surface.Deps, module+"/server") {
			t.Errorf("%s does not depend on package server at all", s)
		}
	}
}
