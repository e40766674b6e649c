// The YAML tab's editor: CodeMirror 6 with YAML highlighting and the parse
// endpoint's problems as lint diagnostics. Imported dynamically, so
// CodeMirror is a chunk of its own that only the pipelines page loads.
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { yaml } from "@codemirror/lang-yaml";
import { bracketMatching, HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { type Diagnostic, lintGutter, setDiagnostics } from "@codemirror/lint";
import { Annotation, Compartment, EditorState } from "@codemirror/state";
import { drawSelection, EditorView, highlightActiveLine, keymap, lineNumbers } from "@codemirror/view";
import { tags as t } from "@lezer/highlight";
import { charColumn, type Problem } from "./model";

export interface YamlEditor {
  // set replaces the text (without reporting it as an edit).
  set(text: string): void;
  // problems shows the problems found in text, when the editor still holds it.
  problems(text: string, ps: Problem[]): void;
  readOnly(on: boolean): void;
  // reveal puts the cursor on a problem's position and focuses the editor.
  reveal(p: Problem): void;
  destroy(): void;
}

const fromOutside = Annotation.define<boolean>();

// tokens are the editor's colours from the visual system's tokens
// (style.css), so that the selection, the lint tooltips and the panels are
// readable in the light and the dark scheme alike: CodeMirror's own theme
// is light, whatever the scheme. A theme outranks the base theme.
const tokens = EditorView.theme({
  "&": { color: "var(--fg)", backgroundColor: "var(--bg)" },
  ".cm-content": { caretColor: "var(--fg)" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--fg)" },
  ".cm-selectionBackground, &.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-content ::selection": {
    backgroundColor: "var(--selection)",
  },
  ".cm-selectionMatch": { backgroundColor: "var(--mark)" },
  "&.cm-focused .cm-matchingBracket": { backgroundColor: "var(--accent-bg)", color: "var(--accent-fg)", outline: "1px solid var(--accent-line)" },
  "&.cm-focused .cm-nonmatchingBracket": { backgroundColor: "var(--danger-bg)", color: "var(--danger-fg)" },
  ".cm-gutters": { backgroundColor: "var(--panel)", color: "var(--muted)", borderRightColor: "var(--line)" },
  ".cm-activeLine, .cm-activeLineGutter": { backgroundColor: "transparent" },
  ".cm-tooltip": { backgroundColor: "var(--raised)", color: "var(--fg)", border: "1px solid var(--line)", boxShadow: "var(--shadow)" },
  ".cm-tooltip .cm-diagnostic": { color: "var(--fg)" },
  ".cm-diagnostic-error": { borderLeftColor: "var(--danger)" },
  ".cm-diagnostic-warning": { borderLeftColor: "var(--warn)" },
  ".cm-diagnostic-info": { borderLeftColor: "var(--accent)" },
  ".cm-panels": { backgroundColor: "var(--panel)", color: "var(--fg)" },
  ".cm-lintRange-error": { textDecorationColor: "var(--danger)" },
});
// syntax colours YAML's tokens with the visual system's syntax tokens
// (style.css --hl-*, the diff's too), so that they follow the scheme:
// CodeMirror's default highlight style is for a light background.
const syntax = HighlightStyle.define([
  { tag: [t.propertyName, t.definition(t.propertyName)], color: "var(--hl-name)" },
  { tag: [t.string, t.special(t.string), t.content], color: "var(--hl-string)" },
  { tag: [t.number, t.bool, t.null, t.atom, t.keyword], color: "var(--hl-attr)" },
  { tag: [t.comment, t.lineComment, t.blockComment], color: "var(--hl-comment)", fontStyle: "italic" },
  { tag: [t.meta, t.processingInstruction, t.documentMeta], color: "var(--hl-keyword)" },
  { tag: [t.labelName, t.typeName, t.special(t.variableName)], color: "var(--hl-builtin)" },
  { tag: [t.punctuation, t.separator, t.squareBracket, t.brace], color: "var(--muted)" },
  { tag: t.invalid, color: "var(--danger)" },
]);
const access = new Compartment();

export function createEditor(parent: HTMLElement, text: string, readOnly: boolean, onEdit: (text: string) => void): YamlEditor {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: text,
      extensions: [
        lineNumbers(),
        history(),
        drawSelection(),
        highlightActiveLine(),
        bracketMatching(),
        syntaxHighlighting(syntax),
        keymap.of([...defaultKeymap, ...historyKeymap]),
        yaml(),
        lintGutter(),
        tokens,
        EditorView.lineWrapping,
        access.of(EditorState.readOnly.of(readOnly)),
        EditorView.contentAttributes.of({ "aria-label": "Pipeline YAML", "data-testid": "yaml-editor", tabindex: "0" }), // tabindex: axe counts the scroller as focusable
        EditorView.updateListener.of((u) => {
          if (u.docChanged && !u.transactions.some((t) => t.annotation(fromOutside))) onEdit(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    set(text) {
      if (view.state.doc.toString() === text) return;
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text }, annotations: fromOutside.of(true) });
    },
    problems(text, ps) {
      if (view.state.doc.toString() !== text) return; // a newer text is being checked
      view.dispatch(setDiagnostics(view.state, ps.map((p) => diagnostic(view.state, p))));
    },
    readOnly(on) {
      view.dispatch({ effects: access.reconfigure(EditorState.readOnly.of(on)) });
    },
    reveal(p) {
      const d = diagnostic(view.state, p);
      view.dispatch({ selection: { anchor: d.from }, scrollIntoView: true });
      view.focus();
    },
    destroy: () => view.destroy(),
  };
}

// diagnostic marks a problem from its line and column (in bytes) to the end
// of the value there; a problem without a position marks the first line.
function diagnostic(state: EditorState, p: Problem): Diagnostic {
  const doc = state.doc;
  const message = p.path ? `${p.path}: ${p.message}` : p.message;
  if (!p.line || p.line > doc.lines) {
    const first = doc.line(1);
    return { from: first.from, to: first.to, severity: "error", message, source: p.code };
  }
  const line = doc.line(p.line);
  const from = line.from + charColumn(line.text, p.column || 1);
  const rest = line.text.slice(from - line.from);
  // A value ends at the end of the line, a comment, or in a flow
  // collection ({done: a, failed: b}) at the next "," or closing bracket.
  const value = /^[^,}\]]*?(?=\s+#|\s*$|[,}\]])/.exec(rest)![0].length;
  return { from, to: Math.min(line.to, from + Math.max(value, 1)), severity: "error", message, source: p.code };
}
