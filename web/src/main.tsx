import { render } from "preact";
import { App } from "./app";
import "./style.css";

document.body.dataset.ready = "0";
render(<App />, document.getElementById("app")!);
