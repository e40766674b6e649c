export default function Page(props: Record<string, string>) {
  return <h1>ticket {JSON.stringify(props)}</h1>;
}
