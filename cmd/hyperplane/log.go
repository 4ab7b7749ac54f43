package main

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hyperplane-ml/hyperplane/config"
)

// newLogger builds the process's logger: JSON in containers, console on a
// terminal, unless the config says which.
func newLogger(c config.Log, w io.Writer) *zap.Logger {
	format := c.Format
	if format == config.LogAuto || format == "" {
		format = config.LogJSON
		if isTerminal(w) {
			format = config.LogConsole
		}
	}
	var enc zapcore.Encoder
	if format == config.LogConsole {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), c.Level.Zap()))
}
