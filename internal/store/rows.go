package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
)

// Rows is the whole result of a query, already read. Values hold int64,
// float64, string, []byte or nil on every engine.
type Rows struct {
	Columns []string
	Values  [][]any
}

// Len returns the number of rows.
func (r *Rows) Len() int { return len(r.Values) }

// Scan copies row i into dest, one pointer per column. Supported targets:
// *string, *int64, *int, *float64, *bool, *[]byte, *json.RawMessage, *any,
// *sql.NullString, *sql.NullInt64; NULL becomes the zero value for the plain
// types.
func (r *Rows) Scan(i int, dest ...any) error {
	if i < 0 || i >= len(r.Values) {
		return fmt.Errorf("scan row %d: only %d rows", i, len(r.Values))
	}
	row := r.Values[i]
	if len(dest) != len(row) {
		return fmt.Errorf("scan row %d: %d targets for %d columns", i, len(dest), len(row))
	}
	for c, d := range dest {
		if err := assign(d, row[c]); err != nil {
			return fmt.Errorf("scan row %d column %q: %w", i, r.Columns[c], err)
		}
	}
	return nil
}

func assign(dest, v any) error {
	switch d := dest.(type) {
	case *any:
		*d = v
	case *string:
		switch x := v.(type) {
		case nil:
			*d = ""
		case string:
			*d = x
		case []byte:
			*d = string(x)
		case int64:
			*d = strconv.FormatInt(x, 10)
		case float64:
			*d = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			return fmt.Errorf("cannot scan %T into string", v)
		}
	case *sql.NullString:
		if v == nil {
			*d = sql.NullString{}
			return nil
		}
		var s string
		if err := assign(&s, v); err != nil {
			return err
		}
		*d = sql.NullString{String: s, Valid: true}
	case *int64:
		n, err := toInt(v)
		if err != nil {
			return err
		}
		*d = n
	case *int:
		n, err := toInt(v)
		if err != nil {
			return err
		}
		*d = int(n)
	case *sql.NullInt64:
		if v == nil {
			*d = sql.NullInt64{}
			return nil
		}
		n, err := toInt(v)
		if err != nil {
			return err
		}
		*d = sql.NullInt64{Int64: n, Valid: true}
	case *bool:
		n, err := toInt(v)
		if err != nil {
			return err
		}
		*d = n != 0
	case *float64:
		switch x := v.(type) {
		case nil:
			*d = 0
		case float64:
			*d = x
		case int64:
			*d = float64(x)
		default:
			return fmt.Errorf("cannot scan %T into float64", v)
		}
	case *[]byte:
		switch x := v.(type) {
		case nil:
			*d = nil
		case []byte:
			*d = append([]byte(nil), x...)
		case string:
			*d = []byte(x)
		default:
			return fmt.Errorf("cannot scan %T into []byte", v)
		}
	case *json.RawMessage:
		var b []byte
		if err := assign(&b, v); err != nil {
			return err
		}
		*d = b
	default:
		return fmt.Errorf("unsupported scan target %T", dest)
	}
	return nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		return x, nil
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot scan %q into an integer", x)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("cannot scan %T into an integer", v)
	}
}

// ScanAll reads every row of rows, in order, with scan (which reads row i):
// the one loop behind every domain's list read.
func ScanAll[T any](rows *Rows, scan func(rows *Rows, i int) (T, error)) ([]T, error) {
	out := make([]T, rows.Len())
	for i := range out {
		var err error
		if out[i], err = scan(rows, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}
