package knowledge

import "time"

func t0() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
