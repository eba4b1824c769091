//go:build !unix

package main

import (
	"errors"
	"os"
)

func flock(*os.File) error { return errors.New("no flock on this system") }
