// FlowGraph draws the pipeline version a ticket's flow is pinned to, its
// current stage lit. The ticket page loads it (with the graph's code and
// styles) only when the person opens the graph.
import { useEffect, useState } from "preact/hooks";
import { enc, get } from "../api";
import { message } from "../load";
import { Alert } from "../ui";
import { Graph } from "./graph";
import type { PipelineVersion } from "./model";
import "./pipelines.css";

export interface FlowGraphProps {
  project: string; // the project's key or id
  pipeline: string;
  version: number;
  current: string;
}

export default function FlowGraph({ project, pipeline, version, current }: FlowGraphProps) {
  const [pv, setPv] = useState<PipelineVersion | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    let live = true;
    setPv(null);
    setError("");
    get<PipelineVersion>(`/api/v1/projects/${enc(project)}/pipelines/${enc(pipeline)}?version=${version}`).then(
      (v) => live && setPv(v),
      (e) => live && setError(`The pipeline could not be read: ${message(e)}`),
    );
    return () => {
      live = false;
    };
  }, [project, pipeline, version]);
  if (error) return <Alert error={error} />;
  if (!pv) return <p class="muted">Reading pipeline {pipeline} v{version}…</p>;
  return <Graph def={pv.definition} current={current} />;
}
