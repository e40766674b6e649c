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
