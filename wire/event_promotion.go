package wire

import (
	"strconv"
)

// Promotion is the event published when a challenger becomes the model
// (docs/compare.md, "Promotion"): after the example at Position, every
// later example is predicted by the promoted configuration.
type Promotion struct {
	// Position is the example's after which the promotion took effect,
	// and the event id its id; the message key is the event id and
	// "#promotion", so a replay of the same offsets publishes the same
	// event under the same key.
	Position Position
	// Model is the model's name (model.name); Version is its version
	// after the promotion, the promoted challenger's.
	Model   string
	Version uint64
	// Promoted is the challenger that became the model, Replaced the name
	// the old model's configuration took as a challenger.
	Promoted, Replaced string
	// Auto is true for a promotion the worker decided
	// (model.compare.promote auto); Request is the id of the request a
	// manual one applied.
	Auto    bool
	Request string
	// Examples is the old model's example count; Compared the labeled
	// examples of the two's comparison, whose log-loss difference (the
	// old model's minus the promoted one's) and band were LogLossDiff,
	// Low and High.
	Examples, Compared     uint64
	LogLossDiff, Low, High float64
	// Promotions counts the model's promotions, this one included.
	Promotions uint64
}

// AppendPromotion appends the promotion event p in encoding e.
func (e Encoding) AppendPromotion(dst []byte, p *Promotion) []byte {
	if e == EncodingMsgpack {
		return p.AppendMsgpack(dst)
	}
	return p.AppendJSON(dst)
}

// AppendJSON appends the event as one JSON object:
//
//	{"event_id":"kafka:t/0/42","promoted":"arow",
//	 "replaced":"clicks","auto":true,"examples":500900,"compared":500900,
//	 "log_loss_diff":0.021,"low":0.002,"high":0.04,"promotions":1,
//	 "model":{"name":"clicks","version":7},
//	 "position":{"source":"kafka:t/0","offset":42}}
//
// request is given for a manual promotion instead of auto.
func (p *Promotion) AppendJSON(dst []byte) []byte {
	dst = appendJSONEventHead(dst, p.Position, Meta{})
	dst = append(dst, `,"promoted":`...)
	dst = appendJSONString(dst, p.Promoted)
	dst = append(dst, `,"replaced":`...)
	dst = appendJSONString(dst, p.Replaced)
	if p.Auto {
		dst = append(dst, `,"auto":true`...)
	} else {
		dst = append(dst, `,"request":`...)
		dst = appendJSONString(dst, p.Request)
	}
	dst = append(dst, `,"examples":`...)
	dst = strconv.AppendUint(dst, p.Examples, 10)
	dst = append(dst, `,"compared":`...)
	dst = strconv.AppendUint(dst, p.Compared, 10)
	dst = append(dst, `,"log_loss_diff":`...)
	dst = appendJSONFloat(dst, p.LogLossDiff)
	dst = append(dst, `,"low":`...)
	dst = appendJSONFloat(dst, p.Low)
	dst = append(dst, `,"high":`...)
	dst = appendJSONFloat(dst, p.High)
	dst = append(dst, `,"promotions":`...)
	dst = strconv.AppendUint(dst, p.Promotions, 10)
	dst = appendJSONModel(dst, p.Model, p.Version)
	dst = append(dst, `,"position":`...)
	dst = appendJSONPosition(dst, p.Position)
	return append(dst, '}')
}

// AppendMsgpack appends the event as a msgpack map with the keys and
// values of AppendJSON.
func (p *Promotion) AppendMsgpack(dst []byte) []byte {
	dst = msgpackMap(dst, 12)
	dst = msgpackStr(dst, "event_id")
	dst = msgpackEventID(dst, p.Position)
	dst = msgpackStr(dst, "promoted")
	dst = msgpackStr(dst, p.Promoted)
	dst = msgpackStr(dst, "replaced")
	dst = msgpackStr(dst, p.Replaced)
	if p.Auto {
		dst = msgpackStr(dst, "auto")
		dst = append(dst, 0xc3)
	} else {
		dst = msgpackStr(dst, "request")
		dst = msgpackStr(dst, p.Request)
	}
	dst = msgpackStr(dst, "examples")
	dst = msgpackUint(dst, p.Examples)
	dst = msgpackStr(dst, "compared")
	dst = msgpackUint(dst, p.Compared)
	dst = msgpackStr(dst, "log_loss_diff")
	dst = msgpackFloat(dst, p.LogLossDiff)
	dst = msgpackStr(dst, "low")
	dst = msgpackFloat(dst, p.Low)
	dst = msgpackStr(dst, "high")
	dst = msgpackFloat(dst, p.High)
	dst = msgpackStr(dst, "promotions")
	dst = msgpackUint(dst, p.Promotions)
	dst = msgpackModel(dst, p.Model, p.Version)
	dst = msgpackStr(dst, "position")
	return msgpackPosition(dst, p.Position)
}
