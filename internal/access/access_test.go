package access

import "testing"

func TestRolesGrantTheirPermissions(t *testing.T) {
	want := map[string][]Permission{
		Viewer: {TrackerRead},
		Member: {TrackerRead, TrackerWrite, RunManage},
		Admin:  {TrackerRead, TrackerWrite, RunManage, ProjectUpdate, MemberManage},
	}
	all := []Permission{TrackerRead, TrackerWrite, RunManage, ProjectUpdate, MemberManage, PlatformAdmin}
	for role, perms := range want {
		for _, p := range all {
			granted := false
			for _, w := range perms {
				granted = granted || w == p
			}
			if Grants(role, p) != granted {
				t.Errorf("Grants(%s, %s) = %v", role, p, !granted)
			}
		}
	}
	if Grants("owner", TrackerRead) || ValidRole("owner") || !ValidRole(Admin) {
		t.Fatal("an unknown role grants something")
	}
	for _, c := range []struct {
		a, b string
		ok   bool
	}{{Admin, Member, true}, {Member, Viewer, true}, {Viewer, Member, false}, {Member, Admin, false}, {Admin, Admin, true}, {"x", Viewer, false}} {
		if RoleAtLeast(c.a, c.b) != c.ok {
			t.Errorf("RoleAtLeast(%s, %s) != %v", c.a, c.b, c.ok)
		}
	}
}

func TestLowerIsTheLesserRole(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{Admin, Viewer, Viewer}, {Viewer, Admin, Viewer}, {Member, Admin, Member}, {Admin, Admin, Admin},
		{Admin, "", ""}, {"", Member, ""}, {"owner", Viewer, ""},
	} {
		if got := Lower(c.a, c.b); got != c.want {
			t.Errorf("Lower(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
