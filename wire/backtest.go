package wire

import (
	"strconv"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Backtest is one example's prequential prediction, as `hyperplane train
// -predictions` writes it: what the model predicted before it learned the
// example, beside the example's label, for scoring with other tools.
type Backtest struct {
	// Meta is the example's id; N stands for it when the example has
	// none.
	Meta Meta
	N    int
	// Labeled says the example had a label, Label.
	Labeled    bool
	Label      int
	Prediction learner.Prediction
}

// AppendJSON appends the line as one JSON object:
//
//	{"id":"a1","label":-1,"predicted":1,"score":0.25,"probability":0.56}
//
// id is the example's id, a string, or N, a number, when it had none;
// label is left out when it had none. predicted, score, probability and,
// for a multiclass model, probabilities are written as in a prediction
// event (see Prediction.AppendJSON).
func (b *Backtest) AppendJSON(dst []byte, labels learner.Labels) []byte {
	dst = append(dst, `{"id":`...)
	if b.Meta.HasID {
		dst = appendJSONString(dst, b.Meta.ID)
	} else {
		dst = strconv.AppendInt(dst, int64(b.N), 10)
	}
	if b.Labeled {
		dst = append(dst, `,"label":`...)
		dst = appendJSONLabel(dst, labels, b.Label)
	}
	dst = append(dst, ',')
	dst = appendJSONPrediction(dst, labels, &b.Prediction)
	return append(dst, '}')
}
