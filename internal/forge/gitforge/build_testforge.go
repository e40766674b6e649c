//go:build ballet_testforge

package gitforge

import "github.com/ballet/ballet/internal/forge"

// TestBuild reports whether this is a test build (the ballet_testforge
// build tag), whose plain-git forge Ballet merges on.
const TestBuild = true

// ForBuild is the plain-git forge of this test build: Merging, on which
// Ballet merges (projects with merge policy auto). Production builds return
// Forge, on which a human merges.
func ForBuild(cacheDir string) forge.Forge { return NewMerging(cacheDir) }
