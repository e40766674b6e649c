// The administration calls and shapes (docs/api.md): organizations,
// projects, members, runners, tokens, webhooks and a person's notification
// settings.
import { del, enc, get, patch, post, request, type Organization, type Project, type Runner } from "../api";

export const roles = ["viewer", "member", "admin"];

export interface Member {
  organization_id: string;
  project_id?: string;
  subject: string;
  role: string;
  created_at: string;
  updated_at: string;
  version: number;
}

// members is the API of one scope's members: an organization's roles, or a
// project's overrides.
export function members(base: string) {
  return {
    list: () => get<{ members: Member[] }>(base).then((r) => r.members),
    set: (subject: string, role: string) => request<Member>("PUT", `${base}/${enc(subject)}`, { role }),
    remove: (subject: string) => del<void>(`${base}/${enc(subject)}`),
  };
}

export const orgs = {
  list: () => get<{ organizations: Organization[] }>("/api/v1/orgs").then((r) => r.organizations),
  get: (org: string) => get<Organization>(`/api/v1/orgs/${enc(org)}`),
  create: (slug: string, name: string) => post<Organization>("/api/v1/orgs", { slug, name }),
  rename: (org: Organization, name: string) => patch<Organization>(`/api/v1/orgs/${enc(org.slug)}`, { version: org.version, name }),
  projects: (org: string) => get<{ projects: Project[] }>(`/api/v1/orgs/${enc(org)}/projects`).then((r) => r.projects),
  createProject: (org: string, body: Record<string, unknown>) => post<Project>(`/api/v1/orgs/${enc(org)}/projects`, body),
};

// runners is the platform admins' API of the runners (docs/runners.md).
export const runners = {
  list: () => get<{ runners: Runner[] }>("/api/v1/runners").then((r) => r.runners),
  drain: (id: string) => post<Runner>(`/api/v1/runners/${enc(id)}/drain`),
  undrain: (id: string) => post<Runner>(`/api/v1/runners/${enc(id)}/undrain`),
};

export interface Token {
  id: string;
  kind: string;
  name: string;
  subject: string;
  acting_for?: string;
  organization_id?: string;
  role?: string;
  scopes: string[] | null;
  expires_at?: string;
  revoked_at?: string;
  created_by: string;
  created_at: string;
}

export interface CreatedToken extends Token {
  token: string; // the secret, shown once
}

export const scopes = ["tracker.read", "tracker.write", "run.manage", "project.update", "member.manage"];

export const tokens = {
  list: () => get<{ tokens: Token[] }>("/api/v1/tokens?limit=1000").then((r) => r.tokens),
  create: (body: Record<string, unknown>) => post<CreatedToken>("/api/v1/tokens", body),
  revoke: (id: string) => del<void>(`/api/v1/tokens/${enc(id)}`),
};

export interface Webhook {
  id: string;
  organization_id: string;
  project_id: string;
  url: string;
  events: string[];
  format: string;
  active: boolean;
  disabled_at: string | null;
  failing: boolean;
  last_error: string | null;
  failing_since: string | null;
  created_by: string;
  created_at: string;
}

export interface CreatedWebhook extends Webhook {
  secret: string; // whsec_…, shown once
}

export interface Delivery {
  id: string;
  webhook_id: string;
  cause: string;
  item: string;
  status: string;
  attempts: number;
  http_status: number | null;
  duration_ms: number | null;
  error: string;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  created_at: string;
}

// causes are the notification causes, also the webhook event names
// (docs/notifications.md).
export const causes = [
  "approval.waiting",
  "question.opened",
  "question.escalated",
  "merge.waiting",
  "flow.stuck",
  "flow.failed",
  "budget.exhausted",
  "ticket.done",
  "runner.missing",
];

export const causeNames: Record<string, string> = {
  "approval.waiting": "an approval waits",
  "question.opened": "a blocking question waits",
  "question.escalated": "a question or approval was escalated",
  "merge.waiting": "a merge waits for a person",
  "flow.stuck": "a flow is stuck",
  "flow.failed": "a flow failed",
  "budget.exhausted": "a flow waits for budget",
  "ticket.done": "a ticket is done",
  "runner.missing": "no runner takes a run",
  "webhook.disabled": "a webhook was disabled",
};

// webhooks is the API of one scope's webhooks (base: …/orgs/{org}/webhooks
// or …/projects/{project}/webhooks).
export function webhooks(base: string) {
  return {
    list: () => get<{ webhooks: Webhook[] }>(base).then((r) => r.webhooks),
    create: (body: { url: string; events: string[]; format: string }) => post<CreatedWebhook>(base, body),
    update: (id: string, body: Record<string, unknown>) => patch<Webhook>(`${base}/${enc(id)}`, body),
    remove: (id: string) => del<void>(`${base}/${enc(id)}`),
    deliveries: (id: string) => get<{ deliveries: Delivery[]; next_before: string | null }>(`${base}/${enc(id)}/deliveries?limit=50`),
    redeliver: (id: string, delivery: string) => post<Delivery>(`${base}/${enc(id)}/deliveries/${enc(delivery)}/redeliver`),
  };
}

export interface NotificationSettings {
  email: string | null;
  email_source: string | null;
  email_confirmed: boolean;
  causes: Record<string, string>;
  digest: string;
  digest_hour: number | null;
  time_zone: string;
  version: number;
}

export const notificationSettings = {
  get: () => get<NotificationSettings>("/api/v1/me/notifications"),
  put: (body: Record<string, unknown>) => request<NotificationSettings>("PUT", "/api/v1/me/notifications", body),
};
