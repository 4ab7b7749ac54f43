package snapshot

import (
	"encoding/binary"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// calibrationBody is the wire form of a learner.Calibration. Vectors are
// bin values: float64 and uint64 little-endian, one byte per event.
type calibrationBody struct {
	Parameters        []byte  `msgpack:"parameters"`
	Count             uint64  `msgpack:"count"`
	LogLoss           float64 `msgpack:"log_loss"`
	Brier             float64 `msgpack:"brier"`
	BinCount          []byte  `msgpack:"bin_count"`
	BinEvents         []byte  `msgpack:"bin_events"`
	BinSum            []byte  `msgpack:"bin_sum"`
	AUCPositive       []byte  `msgpack:"auc_positive,omitempty"`
	AUCNegative       []byte  `msgpack:"auc_negative,omitempty"`
	WindowProbability []byte  `msgpack:"window_probability"`
	WindowEvent       []byte  `msgpack:"window_event"`
	WindowLogLoss     []byte  `msgpack:"window_log_loss"`
	WindowBrier       []byte  `msgpack:"window_brier"`
}

func encodeCalibration(c *learner.Calibration) *calibrationBody {
	if c.IsZero() {
		return nil
	}
	b := &calibrationBody{
		Parameters: f64bytes(c.Parameters),
		Count:      c.Count, LogLoss: c.LogLoss, Brier: c.Brier,
		BinCount: u64bytes(c.BinCount), BinEvents: u64bytes(c.BinEvents), BinSum: f64bytes(c.BinSum),
		AUCPositive: u64bytes(c.AUCPositive), AUCNegative: u64bytes(c.AUCNegative),
		WindowProbability: f64bytes(c.WindowProbability), WindowEvent: make([]byte, len(c.WindowEvent)),
		WindowLogLoss: f64bytes(c.WindowLogLoss), WindowBrier: f64bytes(c.WindowBrier),
	}
	for i, e := range c.WindowEvent {
		if e {
			b.WindowEvent[i] = 1
		}
	}
	return b
}

// calibration decodes b; the state's check follows.
func (b *calibrationBody) calibration() (learner.Calibration, error) {
	c := learner.Calibration{Count: b.Count, LogLoss: b.LogLoss, Brier: b.Brier}
	var err error
	for _, v := range []struct {
		name string
		src  []byte
		dst  *[]float64
	}{
		{"parameters", b.Parameters, &c.Parameters}, {"bin_sum", b.BinSum, &c.BinSum},
		{"window_probability", b.WindowProbability, &c.WindowProbability},
		{"window_log_loss", b.WindowLogLoss, &c.WindowLogLoss}, {"window_brier", b.WindowBrier, &c.WindowBrier},
	} {
		if *v.dst, err = bytesF64(v.src); err != nil {
			return c, fmt.Errorf("calibration %s: %v", v.name, err)
		}
	}
	for _, v := range []struct {
		name string
		src  []byte
		dst  *[]uint64
	}{
		{"bin_count", b.BinCount, &c.BinCount}, {"bin_events", b.BinEvents, &c.BinEvents},
		{"auc_positive", b.AUCPositive, &c.AUCPositive}, {"auc_negative", b.AUCNegative, &c.AUCNegative},
	} {
		if *v.dst, err = bytesU64(v.src); err != nil {
			return c, fmt.Errorf("calibration %s: %v", v.name, err)
		}
	}
	if len(b.WindowEvent) > 0 {
		c.WindowEvent = make([]bool, len(b.WindowEvent))
		for i, e := range b.WindowEvent {
			c.WindowEvent[i] = e != 0
		}
	}
	return c, nil
}

func u64bytes(v []uint64) []byte {
	if v == nil {
		return nil
	}
	out := make([]byte, 8*len(v))
	for i, u := range v {
		binary.LittleEndian.PutUint64(out[8*i:], u)
	}
	return out
}

func bytesU64(b []byte) ([]uint64, error) {
	if b == nil {
		return nil, nil
	}
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of uint64", len(b))
	}
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out, nil
}
