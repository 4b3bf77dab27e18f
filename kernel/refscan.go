package kernel

import "encoding/json"

// scanRef reads a stored result reference — a flat object of plain strings (printable ASCII, no
// escapes) and small non-negative integers, no duplicate keys — into the fields named by set,
// without encoding/json. It reports false for anything else (an unknown key included), and the
// caller then decodes with json.Unmarshal as before. FuzzRefScan holds the two together.
func scanRef(raw []byte, set func(key, str []byte, num int, isStr bool) bool) bool {
	i := refWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = refWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return refWS(raw, i+1) == len(raw)
	}
	var seen [8][]byte
	n := 0
	for {
		ka, kb, ok := refString(raw, i)
		if !ok || n == len(seen) {
			return false
		}
		key := raw[ka:kb]
		for _, k := range seen[:n] {
			if string(k) == string(key) {
				return false
			}
		}
		seen[n] = key
		n++
		i = refWS(raw, kb+1)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		i = refWS(raw, i+1)
		if i < len(raw) && raw[i] == '"' {
			a, b, ok := refString(raw, i)
			if !ok || !set(key, raw[a:b], 0, true) {
				return false
			}
			i = b + 1
		} else {
			a, num := i, 0
			for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
				num = num*10 + int(raw[i]-'0')
				i++
			}
			if d := i - a; d == 0 || d > 9 || d > 1 && raw[a] == '0' || !set(key, nil, num, false) {
				return false
			}
		}
		i = refWS(raw, i)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = refWS(raw, i+1)
		case '}':
			return refWS(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

func refWS(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// refString returns the contents raw[a:b] of the plain string at raw[i] == '"'.
func refString(raw []byte, i int) (a, b int, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return i + 1, j, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// decodeRecordRef is json.Unmarshal(result, &ref), without it for the plain form.
func decodeRecordRef(result []byte, ref *recordRef) error {
	var r recordRef
	if scanRef(result, func(key, str []byte, num int, isStr bool) bool {
		switch {
		case string(key) == "recordId" && isStr:
			r.RecordID = string(str)
		case string(key) == "revision" && !isStr:
			r.Revision = num
		default:
			return false
		}
		return true
	}) {
		*ref = r
		return nil
	}
	return json.Unmarshal(result, ref)
}

// decodeExecutionRef is json.Unmarshal(result, &ref), without it for the plain form.
func decodeExecutionRef(result []byte, ref *executionRef) error {
	var r executionRef
	if scanRef(result, func(key, str []byte, num int, isStr bool) bool {
		switch {
		case string(key) == "recordId" && isStr:
			r.RecordID = string(str)
		case string(key) == "revision" && !isStr:
			r.Revision = num
		case string(key) == "executionId" && isStr:
			r.ExecutionID = string(str)
		default:
			return false
		}
		return true
	}) {
		*ref = r
		return nil
	}
	return json.Unmarshal(result, ref)
}
