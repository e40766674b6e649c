package sample

import "testing"

func TestMax(t *testing.T) {
	if Max(2, 1) != 2 || Max(1, 2) != 2 {
		t.Fatal("Max")
	}
}

func TestSum(t *testing.T) {
	if Sum(3) != 6 {
		t.Fatal("Sum")
	}
}

func TestFlatten(t *testing.T) {
	if got := Flatten([][2]int{{1, 2}, {3, 4}}); len(got) != 4 || got[0] != 1 || got[1] != 2 || got[3] != 4 {
		t.Fatalf("Flatten: %v", got)
	}
}
