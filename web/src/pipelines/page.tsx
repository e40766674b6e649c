export default function Page(props: Record<string, string>) {
  return <h1>page {JSON.stringify(props)}</h1>;
}
