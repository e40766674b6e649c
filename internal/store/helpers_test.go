package store_test

import "time"

var testNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
