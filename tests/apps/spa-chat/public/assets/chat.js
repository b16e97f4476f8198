const room = location.pathname.split("/")[2] ?? "lobby";
const res = await fetch(`/api/rooms/${room}/messages`);
document.getElementById("root").textContent = JSON.stringify(await res.json());
