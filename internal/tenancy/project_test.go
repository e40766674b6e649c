package tenancy

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// fullInput is a project with every setting away from its default.
func fullInput(key string) ProjectInput {
	ticket, day := budget.Dollars(1_500_000), budget.Dollars(20_000_000)
	limit := 5
	return ProjectInput{Key: key, Name: "Web shop",
		Repository: &Repository{Forge: "gitea", URL: "https://gitea.example.com/acme/" + strings.ToLower(key), DefaultBranch: "trunk",
			CredentialsRef: "env:ACME_TOKEN", APIURL: "https://gitea.example.com/api/v1", WebhookSecretRef: "env:ACME_HOOK"},
		MergePolicy:      &MergePolicy{Mode: "auto", RequiredApprovals: 2, RequiredChecks: []string{"ci", "lint"}},
		ConcurrencyLimit: &limit,
		Budgets:          &Budgets{PerTicketUSD: &ticket, PerDayUSD: &day},
		TicketTypes:      []string{"task", "spike"},
	}
}

// allowACME lets the references env:ACME_* be saved.
var allowACME = &secret.Policy{Allow: []string{"env:ACME_*"}}

// TestAProjectReadsBackAsCreatedAndUpdated: every setting of a project
// (repository, merge policy, concurrency, budgets, ticket types, pause)
// is stored as created and as updated: FindProject (by key and by id)
// and ListProjects answer what CreateProject and UpdateProject answered,
// and a field a patch leaves out keeps its value.
func TestAProjectReadsBackAsCreatedAndUpdated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, c, o, acmeP := fakeWorld(t, st)
		svc.Secrets = allowACME
		web, err := svc.CreateProject(ctx, alice, o.ID, fullInput("WEB"))
		if err != nil {
			t.Fatal(err)
		}
		readsBack := func(want Project) {
			t.Helper()
			for _, ref := range []string{want.Key, want.ID} {
				if got, err := svc.FindProject(ctx, ref); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("FindProject(%s) = %+v, %v\nwant %+v", ref, got, err, want)
				}
			}
			list, err := svc.ListProjects(ctx, o.ID)
			if err != nil || len(list) != 2 || !reflect.DeepEqual(list[1], want) || list[0].Key != "ACME" {
				t.Errorf("ListProjects = %+v, %v; want ACME then %+v", list, err, want)
			}
		}
		readsBack(web)
		if acmeP.Repository != nil || acmeP.Budgets != (Budgets{}) || acmeP.Paused {
			t.Errorf("a project with no settings: %+v", acmeP)
		}

		c.Advance(time.Minute)
		yes, three := true, 3
		ticket := budget.Dollars(2_000_000)
		cred := "env:ACME_OTHER"
		patch := ProjectPatch{
			Repository:       strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{CredentialsRef: strictjson.Nullable[string]{Set: true, Value: &cred}}},
			MergePolicy:      strictjson.Nullable[MergePolicyPatch]{Set: true, Value: &MergePolicyPatch{RequiredApprovals: strictjson.Nullable[int]{Set: true, Value: &three}}},
			Budgets:          strictjson.Nullable[BudgetsPatch]{Set: true, Value: &BudgetsPatch{PerTicketUSD: strictjson.Nullable[budget.Dollars]{Set: true, Value: &ticket}}},
			ConcurrencyLimit: &three,
			TicketTypes:      []string{"bug"},
			Paused:           &yes,
		}
		got, err := svc.UpdateProject(ctx, alice, web, web.Version, patch)
		if err != nil {
			t.Fatal(err)
		}
		want := web
		want.Repository = &Repository{Forge: "gitea", URL: web.Repository.URL, DefaultBranch: "trunk", CredentialsRef: cred,
			APIURL: web.Repository.APIURL, WebhookSecretRef: "env:ACME_HOOK"}
		want.MergePolicy = MergePolicy{Mode: "auto", RequiredApprovals: 3, RequiredChecks: []string{"ci", "lint"}}
		want.Budgets = Budgets{PerTicketUSD: &ticket, PerDayUSD: web.Budgets.PerDayUSD}
		want.ConcurrencyLimit, want.TicketTypes, want.Paused = 3, []string{"bug"}, true
		want.Version, want.UpdatedAt = web.Version+1, c.Now().Truncate(time.Millisecond)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("UpdateProject = %+v\nwant %+v", got, want)
		}
		readsBack(want)
		if a, err := svc.FindProject(ctx, acmeP.ID); err != nil || !reflect.DeepEqual(a, acmeP) {
			t.Errorf("another project changed: %+v %v", a, err)
		}

		evs, err := event.List(ctx, st, event.Filter{EntityID: web.ID})
		if err != nil || len(evs) != 2 {
			t.Fatalf("web's events: %+v %v", evs, err)
		}
		pu, ok, err := event.Decode[ProjectUpdated](evs[1])
		if !ok || err != nil || pu.Changes.Paused == nil || !*pu.Changes.Paused || *pu.Changes.ConcurrencyLimit != 3 ||
			!slices.Equal(pu.Changes.TicketTypes, []string{"bug"}) || pu.Changes.Name != nil || pu.Changes.Repository.Value.CredentialsRef != cred {
			t.Errorf("project.updated: %+v %v %v", pu, ok, err)
		}
		if kinds := jobKinds(t, st); !slices.Equal(kinds, []string{"test.project_changed"}) {
			t.Errorf("jobs %v, want the hook's one", kinds)
		}

		if _, err := svc.UpdateProject(ctx, alice, web, web.Version, ProjectPatch{Paused: new(false)}); apperr.Code(err) != apperr.Conflict {
			t.Errorf("a patch at the version before: %v, want conflict", err)
		}
		readsBack(want)
	})
}

// TestProjectKeysAreUniqueAndFindOnlyTheirProject: a taken key is a
// conflict naming it; a key or an id finds its own project, an unknown one
// none.
func TestProjectKeysAreUniqueAndFindOnlyTheirProject(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, _, o, acmeP := fakeWorld(t, st)
		_, err := svc.CreateProject(ctx, alice, o.ID, ProjectInput{Key: "ACME", Name: "Again"})
		if apperr.Code(err) != apperr.Conflict || !strings.Contains(err.Error(), `"ACME"`) {
			t.Errorf("a taken key: %v, want a conflict naming it", err)
		}
		ops, err := svc.CreateProject(ctx, alice, o.ID, ProjectInput{Key: "OPS", Name: "Ops"})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []Project{acmeP, ops} {
			for _, ref := range []string{want.Key, want.ID} {
				if got, err := svc.FindProject(ctx, ref); err != nil || got.ID != want.ID {
					t.Errorf("FindProject(%s) = %s, %v; want %s", ref, got.Key, err, want.Key)
				}
			}
		}
		if _, err := svc.FindProject(ctx, "NOPE"); apperr.Code(err) != apperr.NotFound {
			t.Errorf("an unknown key: %v, want not found", err)
		}
	})
}

// TestSecretReferencesNeedThePlatformsAllowList: a project's credentials
// and webhook references are saved only when the platform's allow list
// lets them resolve (none without a policy), each refusal naming its
// field; a repository change checks both again, a change elsewhere
// neither.
func TestSecretReferencesNeedThePlatformsAllowList(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, _, o, _ := fakeWorld(t, st)
		in := fullInput("WEB")
		if _, err := svc.CreateProject(ctx, alice, o.ID, in); !slices.Equal(fieldsOf(err), []string{"repository.credentials_ref", "repository.webhook_secret_ref"}) {
			t.Errorf("no policy: %v, want both references refused", err)
		}
		svc.Secrets = &secret.Policy{Allow: []string{"env:ACME_TOKEN"}}
		if _, err := svc.CreateProject(ctx, alice, o.ID, in); !slices.Equal(fieldsOf(err), []string{"repository.webhook_secret_ref"}) {
			t.Errorf("the webhook's reference not allowed: %v, want it refused alone", err)
		}
		svc.Secrets = &secret.Policy{Allow: []string{"env:ACME_HOOK"}}
		if _, err := svc.CreateProject(ctx, alice, o.ID, in); !slices.Equal(fieldsOf(err), []string{"repository.credentials_ref"}) {
			t.Errorf("the credentials' reference not allowed: %v, want it refused alone", err)
		}
		noRefs := fullInput("BARE")
		noRefs.Repository.CredentialsRef, noRefs.Repository.WebhookSecretRef = "", ""
		svc.Secrets = nil
		if _, err := svc.CreateProject(ctx, alice, o.ID, noRefs); err != nil {
			t.Errorf("a repository without references, no policy: %v", err)
		}

		svc.Secrets = allowACME
		web, err := svc.CreateProject(ctx, alice, o.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		svc.Secrets = &secret.Policy{Allow: []string{"env:ACME_HOOK"}} // the allow list narrowed since
		name := "Renamed"
		if web, err = svc.UpdateProject(ctx, alice, web, web.Version, ProjectPatch{Name: &name}); err != nil {
			t.Errorf("a change that leaves the repository: %v", err)
		}
		url := "https://gitea.example.com/acme/elsewhere"
		repo := strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{URL: strictjson.Nullable[string]{Set: true, Value: &url}}}
		if _, err := svc.UpdateProject(ctx, alice, web, web.Version, ProjectPatch{Repository: repo}); !slices.Equal(fieldsOf(err), []string{"repository.credentials_ref"}) {
			t.Errorf("moving the repository under a narrower list: %v, want its credentials refused", err)
		}
	})
}

// TestASecretReferenceIsItsOrganizations: under a pattern naming the
// organization (env:GITEA_{ORG}_TOKEN), acme's admin cannot save globex's
// credential as a project's reference (400 naming the field) — not even
// where a shared pattern (env:GITEA_*) matches it too — nor move a project
// onto it; each organization saves its own.
func TestASecretReferenceIsItsOrganizations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, _, acme, _ := fakeWorld(t, st)
		globex, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "globex", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		svc.Secrets = &secret.Policy{Allow: []string{"env:GITEA_*", "env:GITEA_{ORG}_TOKEN", "env:GITEA_{ORG}_HOOK"}}
		steal := fullInput("STEAL")
		steal.Repository.CredentialsRef, steal.Repository.WebhookSecretRef = "env:GITEA_GLOBEX_TOKEN", "env:GITEA_GLOBEX_HOOK"
		if _, err := svc.CreateProject(ctx, alice, acme.ID, steal); !slices.Equal(fieldsOf(err), []string{"repository.credentials_ref", "repository.webhook_secret_ref"}) {
			t.Errorf("acme saving globex's references: %v, want both refused", err)
		}
		own := fullInput("OWN")
		own.Repository.CredentialsRef, own.Repository.WebhookSecretRef = "env:GITEA_ACME_TOKEN", "env:GITEA_ACME_HOOK"
		web, err := svc.CreateProject(ctx, alice, acme.ID, own)
		if err != nil {
			t.Fatalf("acme saving its own references: %v", err)
		}
		gx := fullInput("GX")
		gx.Repository.CredentialsRef, gx.Repository.WebhookSecretRef = "env:GITEA_GLOBEX_TOKEN", "env:GITEA_CA_SECRET"
		if _, err := svc.CreateProject(ctx, alice, globex.ID, gx); err != nil {
			t.Errorf("globex saving its own and a shared reference: %v", err)
		}
		ref := "env:GITEA_GLOBEX_TOKEN"
		repo := strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{CredentialsRef: strictjson.Nullable[string]{Set: true, Value: &ref}}}
		if _, err := svc.UpdateProject(ctx, alice, web, web.Version, ProjectPatch{Repository: repo}); !slices.Equal(fieldsOf(err), []string{"repository.credentials_ref"}) {
			t.Errorf("acme moving its project onto globex's credential: %v, want it refused", err)
		}
	})
}

// TestProjectRulesAtTheirBounds: each bound of a project's settings
// accepts its limit and refuses one past it, naming the field.
func TestProjectRulesAtTheirBounds(t *testing.T) {
	max, over := budget.Dollars(budget.MaxMicros), budget.Dollars(budget.MaxMicros+1)
	neg := budget.Dollars(-1)
	types := func(n int) []string {
		out := []string{}
		for i := range n {
			out = append(out, "t"+strings.Repeat("x", i))
		}
		return out
	}
	checks := func(cs ...string) ProjectInput {
		return ProjectInput{MergePolicy: &MergePolicy{Mode: "manual", RequiredChecks: cs}}
	}
	fifty := make([]string, 50)
	for i := range fifty {
		fifty[i] = "check"
	}
	for _, c := range []struct {
		name  string
		in    ProjectInput
		field string // "" for none
	}{
		{"a name of 200", ProjectInput{Name: strings.Repeat("n", 200)}, ""},
		{"a name of 201", ProjectInput{Name: strings.Repeat("n", 201)}, "name"},
		{"a name of two lines", ProjectInput{Name: "a\nb"}, "name"},
		{"a check of 200", checks(strings.Repeat("c", 200)), ""},
		{"a check of 201", checks("ci", strings.Repeat("c", 201)), "merge_policy.required_checks[1]"},
		{"a blank check", checks(" "), "merge_policy.required_checks[0]"},
		{"a check of two lines", checks("a\nb"), "merge_policy.required_checks[0]"},
		{"50 checks", checks(fifty...), ""},
		{"51 checks", checks(append(fifty, "one more")...), "merge_policy.required_checks"},
		{"no mode", ProjectInput{MergePolicy: &MergePolicy{}}, "merge_policy.mode"},
		{"auto", ProjectInput{MergePolicy: &MergePolicy{Mode: "auto"}}, ""},
		{"11 approvals", ProjectInput{MergePolicy: &MergePolicy{Mode: "auto", RequiredApprovals: 11}}, "merge_policy.required_approvals"},
		{"the largest budget", ProjectInput{Budgets: &Budgets{PerTicketUSD: &max, PerDayUSD: &max}}, ""},
		{"a ticket budget too big", ProjectInput{Budgets: &Budgets{PerTicketUSD: &over}}, "budgets.per_ticket_usd"},
		{"a negative day budget", ProjectInput{Budgets: &Budgets{PerDayUSD: &neg}}, "budgets.per_day_usd"},
		{"20 ticket types", ProjectInput{TicketTypes: types(20)}, ""},
		{"21 ticket types", ProjectInput{TicketTypes: types(21)}, "ticket_types"},
		{"no ticket types", ProjectInput{TicketTypes: []string{}}, "ticket_types"},
		{"a type twice", ProjectInput{TicketTypes: []string{"task", "bug", "task"}}, "ticket_types[2]"},
		{"a type that is no name", ProjectInput{TicketTypes: []string{"Task"}}, "ticket_types[0]"},
		{"a bad branch", ProjectInput{Repository: &Repository{Forge: "git", URL: "/srv/a.git", DefaultBranch: "-x"}}, "repository.default_branch"},
		{"a bad credentials ref", ProjectInput{Repository: &Repository{Forge: "git", URL: "/srv/a.git", CredentialsRef: "ACME"}}, "repository.credentials_ref"},
		{"a bad webhook ref", ProjectInput{Repository: &Repository{Forge: "git", URL: "/srv/a.git", WebhookSecretRef: "ACME"}}, "repository.webhook_secret_ref"},
		{"an API for plain git", ProjectInput{Repository: &Repository{Forge: "git", URL: "/srv/a.git", APIURL: "https://x.example/api"}}, "repository.api_url"},
		{"a bad API URL", ProjectInput{Repository: &Repository{Forge: "github", URL: "https://github.com/a/b", APIURL: "ftp://x"}}, "repository.api_url"},
		{"a bad URL", ProjectInput{Repository: &Repository{Forge: "git", URL: "-x"}}, "repository.url"},
	} {
		in := c.in
		in.Key = "ACME"
		if in.Name == "" {
			in.Name = "Acme"
		}
		_, err := newProject("p1", "o1", in, decideNow)
		var want []string
		if c.field != "" {
			want = []string{c.field}
		}
		if got := fieldsOf(err); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want problems with %v", c.name, err, want)
		}
	}
}

// TestANewProjectsMergePolicyListsItsChecks: a merge policy given without
// checks, or patched from one without, lists none ([], never null); a
// repository patched without a branch is on main.
func TestANewProjectsMergePolicyListsItsChecks(t *testing.T) {
	p, err := newProject("p1", "o1", ProjectInput{Key: "ACME", Name: "Acme", MergePolicy: &MergePolicy{Mode: "auto", RequiredApprovals: 1}}, decideNow)
	if err != nil || p.MergePolicy.Mode != "auto" || p.MergePolicy.RequiredApprovals != 1 || p.MergePolicy.RequiredChecks == nil {
		t.Fatalf("newProject: %+v %v", p.MergePolicy, err)
	}
	p.MergePolicy.RequiredChecks = nil // as stored before checks were a list
	mode := "manual"
	got, _, err := patchProject(p, 1, ProjectPatch{MergePolicy: strictjson.Nullable[MergePolicyPatch]{Set: true, Value: &MergePolicyPatch{Mode: strictjson.Nullable[string]{Set: true, Value: &mode}}}})
	if err != nil || got.MergePolicy.RequiredChecks == nil || got.MergePolicy.RequiredApprovals != 1 {
		t.Errorf("patched: %+v %v", got.MergePolicy, err)
	}
	p.Repository = &Repository{Forge: "git", URL: "/srv/a.git", DefaultBranch: "trunk"}
	got, _, err = patchProject(p, 1, ProjectPatch{Repository: strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{DefaultBranch: strictjson.Nullable[string]{Set: true}}}})
	if err != nil || got.Repository.DefaultBranch != "main" {
		t.Errorf("branch null: %+v %v", got.Repository, err)
	}
}

// TestEachFieldAloneIsAPatch: a patch naming one field, any one, changes
// it and reports only it as changed.
func TestEachFieldAloneIsAPatch(t *testing.T) {
	yes, n := true, 7
	for _, c := range []struct {
		name  string
		in    ProjectPatch
		check func(p Project, ch ProjectChanges) bool
	}{
		{"paused", ProjectPatch{Paused: &yes}, func(p Project, ch ProjectChanges) bool { return p.Paused && *ch.Paused && ch.ConcurrencyLimit == nil }},
		{"concurrency", ProjectPatch{ConcurrencyLimit: &n}, func(p Project, ch ProjectChanges) bool {
			return p.ConcurrencyLimit == 7 && *ch.ConcurrencyLimit == 7 && ch.Paused == nil
		}},
		{"ticket types", ProjectPatch{TicketTypes: []string{"bug"}}, func(p Project, ch ProjectChanges) bool {
			return slices.Equal(p.TicketTypes, []string{"bug"}) && slices.Equal(ch.TicketTypes, []string{"bug"}) && ch.Paused == nil
		}},
		{"merge policy null", ProjectPatch{MergePolicy: strictjson.Nullable[MergePolicyPatch]{Set: true}}, func(p Project, ch ProjectChanges) bool {
			return reflect.DeepEqual(p.MergePolicy, defaultMergePolicy()) && ch.MergePolicy != nil && ch.TicketTypes == nil
		}},
	} {
		p, ch, err := patchProject(acme(t), 1, c.in)
		if err != nil || !c.check(p, ch) {
			t.Errorf("%s: %+v %+v %v", c.name, p, ch, err)
		}
	}
}

// TestEveryRepositoryPolicyAndBudgetFieldPatchesAlone: each field of the
// repository, the merge policy and the budgets can be set, or put back to
// its default with null, on its own; the others keep their values.
func TestEveryRepositoryPolicyAndBudgetFieldPatchesAlone(t *testing.T) {
	in := fullInput("WEB")
	base, err := newProject("p1", "o1", in, decideNow)
	if err != nil {
		t.Fatal(err)
	}
	str := func(v string) strictjson.Nullable[string] { return strictjson.Nullable[string]{Set: true, Value: &v} }
	null := strictjson.Nullable[string]{Set: true}
	repo := func(r RepositoryPatch) ProjectPatch {
		return ProjectPatch{Repository: strictjson.Nullable[RepositoryPatch]{Set: true, Value: &r}}
	}
	policy := func(m MergePolicyPatch) ProjectPatch {
		return ProjectPatch{MergePolicy: strictjson.Nullable[MergePolicyPatch]{Set: true, Value: &m}}
	}
	budgets := func(b BudgetsPatch) ProjectPatch {
		return ProjectPatch{Budgets: strictjson.Nullable[BudgetsPatch]{Set: true, Value: &b}}
	}
	one, nine := 1, budget.Dollars(9_000_000)
	for _, c := range []struct {
		name string
		in   ProjectPatch
		edit func(p *Project) // what the patch changes in base
	}{
		{"forge", repo(RepositoryPatch{Forge: str("github"), URL: str("https://github.com/acme/web")}), func(p *Project) {
			p.Repository.Forge, p.Repository.URL = "github", "https://github.com/acme/web"
		}},
		{"branch", repo(RepositoryPatch{DefaultBranch: str("release")}), func(p *Project) { p.Repository.DefaultBranch = "release" }},
		{"credentials", repo(RepositoryPatch{CredentialsRef: str("env:ACME_2")}), func(p *Project) { p.Repository.CredentialsRef = "env:ACME_2" }},
		{"no credentials", repo(RepositoryPatch{CredentialsRef: null}), func(p *Project) { p.Repository.CredentialsRef = "" }},
		{"api url", repo(RepositoryPatch{APIURL: str("https://api.example.com/v1")}), func(p *Project) { p.Repository.APIURL = "https://api.example.com/v1" }},
		{"no api url", repo(RepositoryPatch{APIURL: null}), func(p *Project) { p.Repository.APIURL = "" }},
		{"webhook", repo(RepositoryPatch{WebhookSecretRef: str("env:ACME_HOOK2")}), func(p *Project) { p.Repository.WebhookSecretRef = "env:ACME_HOOK2" }},
		{"no webhook", repo(RepositoryPatch{WebhookSecretRef: null}), func(p *Project) { p.Repository.WebhookSecretRef = "" }},
		{"mode", policy(MergePolicyPatch{Mode: str("manual")}), func(p *Project) { p.MergePolicy.Mode = "manual" }},
		{"mode null", policy(MergePolicyPatch{Mode: null}), func(p *Project) { p.MergePolicy.Mode = "manual" }},
		{"approvals", policy(MergePolicyPatch{RequiredApprovals: strictjson.Nullable[int]{Set: true, Value: &one}}), func(p *Project) { p.MergePolicy.RequiredApprovals = 1 }},
		{"approvals null", policy(MergePolicyPatch{RequiredApprovals: strictjson.Nullable[int]{Set: true}}), func(p *Project) { p.MergePolicy.RequiredApprovals = 0 }},
		{"checks", policy(MergePolicyPatch{RequiredChecks: strictjson.Nullable[[]string]{Set: true, Value: &[]string{"e2e"}}}), func(p *Project) {
			p.MergePolicy.RequiredChecks = []string{"e2e"}
		}},
		{"checks null", policy(MergePolicyPatch{RequiredChecks: strictjson.Nullable[[]string]{Set: true}}), func(p *Project) { p.MergePolicy.RequiredChecks = []string{} }},
		{"ticket budget", budgets(BudgetsPatch{PerTicketUSD: strictjson.Nullable[budget.Dollars]{Set: true, Value: &nine}}), func(p *Project) { p.Budgets.PerTicketUSD = &nine }},
		{"no ticket budget", budgets(BudgetsPatch{PerTicketUSD: strictjson.Nullable[budget.Dollars]{Set: true}}), func(p *Project) { p.Budgets.PerTicketUSD = nil }},
		{"day budget", budgets(BudgetsPatch{PerDayUSD: strictjson.Nullable[budget.Dollars]{Set: true, Value: &nine}}), func(p *Project) { p.Budgets.PerDayUSD = &nine }},
		{"no day budget", budgets(BudgetsPatch{PerDayUSD: strictjson.Nullable[budget.Dollars]{Set: true}}), func(p *Project) { p.Budgets.PerDayUSD = nil }},
	} {
		b := base
		r := *base.Repository
		b.Repository = &r
		want := b
		wr := r
		want.Repository = &wr
		c.edit(&want)
		got, _, err := patchProject(b, 1, c.in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v %+v, %v\nwant %+v %+v", c.name, got, got.Repository, err, want, want.Repository)
		}
	}
}
