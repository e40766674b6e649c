package needsme

// ChannelQueries are the queries of failing delivery channels, for the
// test that keeps them on indexes (the failing hooks' for a platform
// admin: every scope).
var ChannelQueries = map[string]string{
	"failing webhooks":        webhooksSQL + "1 = 1",
	"mail being retried":      mailCountSQL,
	"the latest mail failure": mailLastSQL,
}
