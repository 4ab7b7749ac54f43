package wire

import (
	"errors"
	"strconv"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// LabelRecord is a record of a labels' input (docs/labels.md): the label of
// the example whose id is ID, or a mark, which carries only its time.
type LabelRecord struct {
	// ID aliases the decoded data or the Decoder's scratch, as Meta.ID.
	ID    []byte
	Label int
	Mark  bool
}

// LabelRecordField is the Field of a DecodeLabel error about the whole
// record (empty, not an object or map, bytes after it).
const LabelRecordField = "label record"

// markKey is the key of a mark: {"mark": "<writer>"}.
const markKey = "mark"

// DecodeLabel decodes a label record as format says: a JSON object or
// msgpack map {"id": ..., "label": ...}, the label in any form an
// example's label takes, or a mark {"mark": ...}. x is scratch. A record
// with features, or without an id or a label, is refused with the field
// named.
func (d *Decoder) DecodeLabel(data []byte, format Format, x *learner.Example) (LabelRecord, error) {
	meta, err := d.DecodeMessage(data, format, x)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) && de.Field == "example" {
			// The whole record is wrong: it is a label record, not an
			// example.
			de.Field = LabelRecordField
		}
		return LabelRecord{}, err
	}
	switch {
	case x.NNZ() > 0:
		return LabelRecord{}, &DecodeError{Field: "features", Problem: "a label record carries an id and a label, not features (do labels.topics or labels.stream name the examples' input?)"}
	case !meta.HasID && !x.Labeled && d.hasUnknownKey(markKey):
		return LabelRecord{Mark: true}, nil
	case !meta.HasID:
		return LabelRecord{}, &DecodeError{Field: "id", Problem: "missing: a label record names the id of its example"}
	case !x.Labeled:
		return LabelRecord{}, &DecodeError{Field: "label", Problem: "missing or null: a label record carries a label"}
	}
	return LabelRecord{ID: meta.ID, Label: x.Label}, nil
}

// hasUnknownKey reports whether the last example decoded had the top-level
// key, which is none of an example's.
func (d *Decoder) hasUnknownKey(key string) bool {
	start := 0
	for _, end := range d.keyEnds {
		if string(d.keys[start:end]) == key {
			return true
		}
		start = end
	}
	return false
}

// AppendLabel appends the label record {"id": id, "label": label} in
// format: msgpack, or JSON for any other format.
func AppendLabel(dst []byte, format Format, id string, label int) []byte {
	if format == FormatMsgpack {
		dst = msgpackMap(dst, 2)
		dst = msgpackStr(dst, "id")
		dst = msgpackStr(dst, id)
		dst = msgpackStr(dst, "label")
		return msgpackInt(dst, int64(label))
	}
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, id)
	dst = append(dst, `,"label":`...)
	dst = strconv.AppendInt(dst, int64(label), 10)
	return append(dst, '}')
}

// AppendMark appends a mark written by writer in format: msgpack, or JSON
// for any other format.
func AppendMark(dst []byte, format Format, writer string) []byte {
	if format == FormatMsgpack {
		dst = msgpackMap(dst, 1)
		dst = msgpackStr(dst, markKey)
		return msgpackStr(dst, writer)
	}
	dst = append(dst, `{"mark":`...)
	dst = appendJSONString(dst, writer)
	return append(dst, '}')
}

// LateLabel is the event published for a label that joined no example:
// one that came after its example's window closed ("late"), or that is
// related to no example ("unknown").
type LateLabel struct {
	// Position is the label record's; the event id derives from it.
	Position Position
	ID       string
	Label    int
	Reason   string
	// Example is the position of the example a late label came for.
	Example *Position
}

// AppendLateLabel appends the event in encoding e:
//
//	{"event_id":"kafka:clicks/0/17","id":"a1","label":1,"reason":"late",
//	 "position":{"source":"kafka:clicks/0","offset":17},
//	 "example":{"source":"kafka:ex/0","offset":42}}
//
// example is left out for an unknown label.
func (e Encoding) AppendLateLabel(dst []byte, l *LateLabel, labels learner.Labels) []byte {
	if e == EncodingMsgpack {
		n := 5
		if l.Example != nil {
			n++
		}
		dst = msgpackMap(dst, n)
		dst = msgpackStr(dst, "event_id")
		dst = msgpackEventID(dst, l.Position)
		dst = msgpackStr(dst, "id")
		dst = msgpackStr(dst, l.ID)
		dst = msgpackStr(dst, "label")
		dst = msgpackLabel(dst, labels, l.Label)
		dst = msgpackStr(dst, "reason")
		dst = msgpackStr(dst, l.Reason)
		dst = msgpackStr(dst, "position")
		dst = msgpackPosition(dst, l.Position)
		if l.Example != nil {
			dst = msgpackStr(dst, "example")
			dst = msgpackPosition(dst, *l.Example)
		}
		return dst
	}
	dst = append(dst, `{"event_id":"`...)
	dst = appendJSONStringBody(dst, l.Position.Source)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, l.Position.Offset, 10)
	dst = append(dst, `","id":`...)
	dst = appendJSONString(dst, l.ID)
	dst = append(dst, `,"label":`...)
	dst = appendJSONLabel(dst, labels, l.Label)
	dst = append(dst, `,"reason":`...)
	dst = appendJSONString(dst, l.Reason)
	dst = append(dst, `,"position":`...)
	dst = appendJSONPosition(dst, l.Position)
	if l.Example != nil {
		dst = append(dst, `,"example":`...)
		dst = appendJSONPosition(dst, *l.Example)
	}
	return append(dst, '}')
}
