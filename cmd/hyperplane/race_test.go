//go:build race

package main

// raceDetector is whether the tests run with -race, which makes the demo
// five to ten times slower.
const raceDetector = true
