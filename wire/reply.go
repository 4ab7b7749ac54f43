package wire

import "github.com/hyperplane-ml/hyperplane/learner"

// Reply is the answer to a prediction request for one example: the fields
// of a prediction event that make sense without a source position.
type Reply struct {
	Meta       Meta
	Prediction learner.Prediction
	// Model and Version name the model that answered and its version.
	Model   string
	Version uint64
}

// AppendJSON appends the reply as one JSON object:
//
//	{"id":"a1","predicted":1,"score":0.25,"probability":0.56,
//	 "model":{"name":"m","version":7}}
//
// with the values of a prediction event (see Prediction.AppendJSON): id
// is left out when the example had none; for a multiclass model score is
// an object of class name to score, probability the predicted class's,
// and probabilities an object of class name to probability.
func (r *Reply) AppendJSON(dst []byte, labels learner.Labels) []byte {
	dst = append(dst, '{')
	if r.Meta.HasID {
		dst = append(dst, `"id":`...)
		dst = appendJSONString(dst, r.Meta.ID)
		dst = append(dst, ',')
	}
	dst = appendJSONPrediction(dst, labels, &r.Prediction)
	dst = appendJSONModel(dst, r.Model, r.Version)
	return append(dst, '}')
}

// AppendMsgpack appends the reply as a msgpack map with the keys and
// values of AppendJSON.
func (r *Reply) AppendMsgpack(dst []byte, labels learner.Labels) []byte {
	n := 1 + msgpackPredictionKeys(labels)
	if r.Meta.HasID {
		n++
	}
	dst = msgpackMap(dst, n)
	if r.Meta.HasID {
		dst = msgpackStr(dst, "id")
		dst = msgpackStr(dst, r.Meta.ID)
	}
	dst = msgpackPrediction(dst, labels, &r.Prediction)
	return msgpackModel(dst, r.Model, r.Version)
}

// AppendMsgpackArrayHeader appends the header of a msgpack array of n
// values, for a sequence of replies.
func AppendMsgpackArrayHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= 0xffff:
		return append(dst, 0xdc, byte(n>>8), byte(n))
	}
	return append(dst, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
