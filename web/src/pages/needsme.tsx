export default function Page(props: Record<string, string>) {
  return <h1>needsme {JSON.stringify(props)}</h1>;
}
