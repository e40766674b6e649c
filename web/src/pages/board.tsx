export default function Page(props: Record<string, string>) {
  return <h1>board {JSON.stringify(props)}</h1>;
}
