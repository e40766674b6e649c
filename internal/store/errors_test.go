package store

import "testing"

func TestUniqueOn(t *testing.T) {
	for msg, want := range map[string]map[string]bool{
		"UNIQUE constraint failed: events.id":                          {"events.id": true, "events.seq": false},
		"UNIQUE constraint failed: skills.project_id, skills.name":     {"skills.project_id": true, "skills.name": true, "skills.id": false},
		"constraint failed: UNIQUE constraint failed: t.a, t.b (2067)": {"t.a": true, "t.b": true},
		"CHECK constraint failed: ballet_lost_race":                    {"ballet_lost_race": false},
	} {
		err := &SQLError{Index: 0, Message: msg}
		for col, ok := range want {
			if UniqueOn(err, col) != ok {
				t.Errorf("UniqueOn(%q, %q) = %v", msg, col, !ok)
			}
		}
	}
}
