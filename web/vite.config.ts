import { defineConfig } from "vite";

// The build lands in internal/webui/dist, embedded in the Go binary and
// committed (.ci/run rebuilds it and fails when it differs).
export default defineConfig({
  build: {
    outDir: "../internal/webui/dist",
    emptyOutDir: true,
    sourcemap: false,
    // .vite/manifest.json: which chunks each page loads (scripts/size.mjs measures the first page).
    manifest: true,
    assetsDir: "assets",
    target: "es2022",
  },
  server: {
    // `npm run dev` proxies the API to a local Core so the UI stays same-origin.
    proxy: {
      "/api": { target: "http://127.0.0.1:8080", ws: true },
      "/auth": "http://127.0.0.1:8080",
    },
  },
});
