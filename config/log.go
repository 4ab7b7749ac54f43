package config

import (
	"go.uber.org/zap/zapcore"

	"github.com/hyperplane-ml/hyperplane/internal/oneof"
)

// Level is the least severe level the log shows.
type Level string

// The levels.
const (
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// Levels lists the levels, the least severe first.
func Levels() []Level { return []Level{LevelDebug, LevelInfo, LevelWarn, LevelError} }

// Validate reports a level that is not one of Levels.
func (l Level) Validate() error { return oneof.Check("level", l, Levels()...) }

// MarshalText writes l as UnmarshalText reads it.
func (l Level) MarshalText() ([]byte, error) { return []byte(l), nil }

// UnmarshalText reads one of Levels by name. On an error l is unchanged.
func (l *Level) UnmarshalText(text []byte) error {
	return oneof.Parse(l, text, "level", Levels()...)
}

// Zap is l as zap numbers it; a level not among Levels is info.
func (l Level) Zap() zapcore.Level {
	switch l {
	case LevelDebug:
		return zapcore.DebugLevel
	case LevelWarn:
		return zapcore.WarnLevel
	case LevelError:
		return zapcore.ErrorLevel
	}
	return zapcore.InfoLevel
}

// LogFormat is how log lines are written.
type LogFormat string

// The log formats.
const (
	LogAuto    LogFormat = "auto"    // console on a terminal, else json
	LogJSON    LogFormat = "json"    // a JSON object per line, for containers
	LogConsole LogFormat = "console" // for people
)

// LogFormats lists the log formats.
func LogFormats() []LogFormat { return []LogFormat{LogAuto, LogJSON, LogConsole} }

// Validate reports a format that is not one of LogFormats.
func (f LogFormat) Validate() error { return oneof.Check("format", f, LogFormats()...) }

// MarshalText writes f as UnmarshalText reads it.
func (f LogFormat) MarshalText() ([]byte, error) { return []byte(f), nil }

// UnmarshalText reads one of LogFormats by name. On an error f is
// unchanged.
func (f *LogFormat) UnmarshalText(text []byte) error {
	return oneof.Parse(f, text, "format", LogFormats()...)
}
