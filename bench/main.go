package main

import (
	_ "github.com/ballet/ballet/internal/store/sqlite"
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/riverdriver/riversqlite"
	_ "github.com/riverqueue/river/rivermigrate"
)

func main() {}
