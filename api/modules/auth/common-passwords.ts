/**
 * Data, not code: the bases of the most commonly chosen passwords, from the published top lists of breached
 * passwords, written lower-case and without the digits and symbols people add around them ("Password2024!" is
 * "password"). password.ts refuses a password that is one of these after that normalisation, or is one of them
 * repeated. A TypeScript file rather than a .txt so that the build carries it without a copy step.
 */
export const COMMON_PASSWORD_BASES: readonly string[] = [
  // Words and phrases
  'password', 'passw0rd', 'passwort', 'pass', 'passpass', 'letmein', 'welcome', 'welcomehome', 'iloveyou', 'loveyou',
  'admin', 'administrator', 'root', 'toor', 'login', 'master', 'secret', 'changeme', 'default', 'guest', 'user',
  'test', 'tester', 'testing', 'demo', 'qwerty', 'qwertyuiop', 'qwertyui', 'qwerty123', 'asdf', 'asdfgh', 'asdfghjkl',
  'zxcvbn', 'zxcvbnm', 'qazwsx', 'qazwsxedc', '1qaz2wsx', 'q1w2e3r4', 'q1w2e3r4t5', 'q1w2e3r4t5y6', 'azerty',
  'abc', 'abcd', 'abcdef', 'abcdefg', 'abcdefgh', 'abcdefghijkl', 'abcabc', 'aaaaaa', 'trustno', 'trustnoone',
  'dragon', 'monkey', 'football', 'baseball', 'basketball', 'soccer', 'hockey', 'golf', 'tennis', 'cricket',
  'sunshine', 'princess', 'princesa', 'shadow', 'superman', 'batman', 'spiderman', 'ironman', 'starwars',
  'pokemon', 'naruto', 'michael', 'jennifer', 'jordan', 'thomas', 'hunter', 'ranger', 'harley', 'charlie',
  'daniel', 'andrew', 'joshua', 'matthew', 'jessica', 'ashley', 'amanda', 'nicole', 'michelle', 'robert',
  'william', 'george', 'anthony', 'justin', 'taylor', 'maggie', 'buster', 'tigger', 'ginger', 'pepper',
  'cookie', 'chocolate', 'cheese', 'banana', 'orange', 'apple', 'summer', 'winter', 'spring', 'autumn', 'freedom',
  'whatever', 'nothing', 'hello', 'helloworld', 'hellokitty', 'flower', 'lovely', 'angel', 'angels', 'baby',
  'babygirl', 'babyboy', 'friends', 'bestfriend', 'family', 'forever', 'computer', 'internet', 'killer', 'soccer',
  'mustang', 'ferrari', 'porsche', 'corvette', 'mercedes', 'yamaha', 'matrix', 'merlin', 'cowboy', 'silver',
  'golden', 'diamond', 'purple', 'yellow', 'blue', 'green', 'black', 'red', 'access', 'passcode', 'mypassword',
  'mypass', 'newpassword', 'oldpassword', 'password1', 'letmeinnow', 'opensesame', 'godzilla', 'jesus', 'christ',
  'blessed', 'heaven', 'london', 'paris', 'berlin', 'newyork', 'chicago', 'dallas', 'boston', 'liverpool',
  'chelsea', 'arsenal', 'manchester', 'barcelona', 'madrid', 'juventus', 'snoopy', 'mickey', 'minnie', 'garfield',
  'scooter', 'hotdog', 'pussy', 'fuckyou', 'fuckoff', 'asshole', 'bitch', 'sexy', 'lovers', 'secretpassword',
  'samsung', 'iphone', 'apple', 'google', 'microsoft', 'windows', 'linux', 'ubuntu', 'oracle', 'cisco', 'server',
  'database', 'postgres', 'mysql', 'tollgate', 'company', 'business', 'office', 'monday', 'friday', 'sunday',
  'january', 'february', 'march', 'april', 'december', 'birthday', 'anniversary', 'qwertz', 'zaq', 'zaq1',
  'zaq12wsx', 'xsw2', 'pa55word', 'p4ssword', 'p@ssword', 'passwordpassword', 'iloveu', 'ilovegod', 'loveme',
  'letmein1', 'superstar', 'rockstar', 'rockyou', 'ninja', 'warrior', 'samurai', 'phoenix', 'wizard', 'magic',
  'zombie', 'vampire', 'legend', 'player', 'gamer', 'minecraft', 'fortnite', 'roblox', 'zelda', 'mario',
  'security', 'secure', 'safety', 'private', 'confidential', 'unknown', 'nopassword', 'blank', 'temp', 'temporary',
  'qwe', 'qweasd', 'qweasdzxc', 'asdasd', 'zxczxc', 'qweqwe', 'poiuytrewq', 'lkjhgfdsa', 'mnbvcxz', 'asdfjkl',
  // Digit runs and keyboard rows (the normalisation leaves nothing of these, so they are checked as typed too)
  '123456', '1234567', '12345678', '123456789', '1234567890', '12345678910', '123123', '123321', '654321', '111111',
  '000000', '121212', '112233', '123654', '147258369', '159753', '987654321', '0987654321', '696969', '666666',
  '1q2w3e', '1q2w3e4r', '1q2w3e4r5t', '1q2w3e4r5t6y', '1qazxsw2', '2wsx3edc', '!qaz2wsx', 'qwerty12345',
];
